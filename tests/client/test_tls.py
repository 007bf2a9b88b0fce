"""TLS as libpq has it (docs/clients.md), on a cluster of its own with TLS
on and certificates made here with openssl: every sslmode, verify-ca and
verify-full against the right and a wrong host name or CA, a client
certificate with `cert` authentication, the PGSSL* variables, and an
election over TLS. On one PostgreSQL version: the client does not depend on
the server's."""
import os
import subprocess
import tempfile
import unittest

from harness import PG_MAJOR, WORK, Cluster, give_to_server, one

CLI = os.environ.get("LEADERLOCK_CLI", "")
TLS_PG = "17"
ONLY_TLS, CERT_USER = "ll_tls_only", "ll_tls_cert"


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certificates(d):
    """A CA, a second CA nobody trusts, a server certificate for DNS name
    localhost (not for 127.0.0.1), and a client certificate for CERT_USER."""
    for ca in ("ca", "other-ca"):
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{ca}.key", "-out", f"{ca}.crt",
                "-days", "2", "-subj", f"/CN=leaderlock test {ca}", cwd=d)
    for name, subject, ext in (("server", "/CN=localhost", "subjectAltName=DNS:localhost"),
                               ("client", f"/CN={CERT_USER}", "extendedKeyUsage=clientAuth")):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                "-subj", subject, cwd=d)
        with open(os.path.join(d, f"{name}.ext"), "w") as f:
            f.write(ext + "\n")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext", cwd=d)
    for f in os.listdir(d):
        os.chmod(os.path.join(d, f), 0o600 if f.endswith(".key") else 0o644)


@unittest.skipUnless(PG_MAJOR == TLS_PG, f"TLS is tested on PostgreSQL {TLS_PG} only")
class TlsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tls-", dir=WORK)
        os.chmod(cls.dir, 0o755)
        make_certificates(cls.dir)
        # The server's copy of its key: owned by the server's user, 0600.
        server = tempfile.mkdtemp(prefix="tls-server-", dir=WORK)
        for f in ("server.crt", "server.key", "ca.crt"):
            with open(os.path.join(cls.dir, f), "rb") as src, open(os.path.join(server, f), "wb") as dst:
                dst.write(src.read())
        os.chmod(os.path.join(server, "server.key"), 0o600)
        give_to_server(server, recursive=True)
        cls.cluster = Cluster.create("tls", "ssl = on", f"ssl_cert_file = '{server}/server.crt'",
                                     f"ssl_key_file = '{server}/server.key'", f"ssl_ca_file = '{server}/ca.crt'")
        hba = os.path.join(cls.cluster.pgdata, "pg_hba.conf")
        with open(hba) as f:
            rules = f.read()
        with open(hba, "w") as f:
            f.write(f"hostssl all {CERT_USER} 127.0.0.1/32 cert\n"
                    f"hostnossl all {CERT_USER} 127.0.0.1/32 reject\n"
                    f"hostnossl all {ONLY_TLS} 127.0.0.1/32 reject\n" + rules)
        cls.admin = cls.cluster.connect()
        for role in (ONLY_TLS, CERT_USER):
            one(cls.admin, f"CREATE ROLE {role} LOGIN")
        one(cls.admin, "SELECT pg_reload_conf()")
        # No ~/.postgresql: libpq's default files are not there.
        cls.home = tempfile.mkdtemp(prefix="tls-home-", dir=WORK)

    @classmethod
    def tearDownClass(cls):
        cls.admin.close()
        cls.cluster.remove()

    def cli(self, dsn, *args, env=None):
        clean = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        return subprocess.run([CLI, "--dsn", dsn, *(args or ("status",))], capture_output=True, text=True,
                              timeout=30, env={**clean, "HOME": self.home, **(env or {})})

    def dsn(self, host="localhost", user=ONLY_TLS, **params):
        extra = " ".join(f"{k}={os.path.join(self.dir, v) if k.startswith('ssl') and k != 'sslmode' else v}"
                         for k, v in params.items())
        return f"host={host} port={self.cluster.port} user={user} dbname=postgres {extra}"

    def assert_exit(self, out, code, text=None):
        self.assertEqual(out.returncode, code, (out.stdout, out.stderr))
        if text:
            self.assertIn(text, out.stderr)

    def test_verify_full_checks_the_host_name(self):
        self.assert_exit(self.cli(self.dsn(sslmode="verify-full", sslrootcert="ca.crt")), 0)
        # The certificate names localhost, not 127.0.0.1.
        self.assert_exit(self.cli(self.dsn("127.0.0.1", sslmode="verify-full", sslrootcert="ca.crt")), 122,
                         "not valid for name")

    def test_verify_ca_checks_the_chain_not_the_name(self):
        self.assert_exit(self.cli(self.dsn("127.0.0.1", sslmode="verify-ca", sslrootcert="ca.crt")), 0)
        for mode in ("verify-ca", "verify-full", "require"):  # require verifies when given a root file
            self.assert_exit(self.cli(self.dsn(sslmode=mode, sslrootcert="other-ca.crt")), 122, "certificate")

    def test_unverified_modes_still_use_tls_and_disable_does_not(self):
        # ONLY_TLS is rejected without TLS: success means the connection was TLS.
        for mode in ("require", "prefer", "allow"):
            self.assert_exit(self.cli(self.dsn("127.0.0.1", sslmode=mode)), 0, None)
        self.assert_exit(self.cli(self.dsn("127.0.0.1", sslmode="disable")), 123, "no encryption")

    def test_a_client_certificate_for_cert_authentication(self):
        self.assert_exit(self.cli(self.dsn(user=CERT_USER, sslmode="verify-full", sslrootcert="ca.crt",
                                           sslcert="client.crt", sslkey="client.key")), 0)
        self.assert_exit(self.cli(self.dsn(user=CERT_USER, sslmode="verify-full", sslrootcert="ca.crt")), 123,
                         "certificate")
        # A key file others may read is refused before connecting, as libpq does.
        loose = os.path.join(self.dir, "loose.key")
        with open(os.path.join(self.dir, "client.key"), "rb") as src, open(loose, "wb") as dst:
            dst.write(src.read())
        os.chmod(loose, 0o644)
        self.assert_exit(self.cli(self.dsn(user=CERT_USER, sslmode="require", sslcert="client.crt",
                                           sslkey="loose.key")), 2, "group or world access")

    def test_the_pgssl_variables_fill_in_what_the_string_leaves_out(self):
        env = {"PGSSLMODE": "verify-full", "PGSSLROOTCERT": os.path.join(self.dir, "ca.crt"),
               "PGSSLCERT": os.path.join(self.dir, "client.crt"), "PGSSLKEY": os.path.join(self.dir, "client.key")}
        self.assert_exit(self.cli(self.dsn(user=CERT_USER), env=env), 0)
        self.assert_exit(self.cli(self.dsn("127.0.0.1", user=CERT_USER), env=env), 122, "not valid for name")
        # The string wins over the environment.
        self.assert_exit(self.cli(self.dsn("127.0.0.1", user=CERT_USER, sslmode="verify-ca"), env=env), 0)
        self.assert_exit(self.cli(self.dsn(), env={"PGSSLMODE": "require", "PGSSLROOTCERT": "system"}), 2,
                         "weak sslmode")

    def test_an_election_over_tls(self):
        out = self.cli(self.dsn(sslmode="verify-full", sslrootcert="ca.crt"),
                       "run", "--key", "tls-election", "--timeout", "10s", "--", "sh", "-c", "exit 7")
        self.assert_exit(out, 7)
        self.assertIsNone(one(self.admin, "SELECT holder FROM leaderlock WHERE key = 'tls-election'"))
        self.assertEqual(one(self.admin, "SELECT term FROM leaderlock WHERE key = 'tls-election'"), 1)
