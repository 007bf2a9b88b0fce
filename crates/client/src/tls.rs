//! TLS with libpq's meaning of its settings: `sslmode` (disable, allow,
//! prefer, require, verify-ca, verify-full), `sslrootcert` (a PEM file, or
//! `system` for the operating system's trusted roots), `sslcert` and
//! `sslkey` (a client certificate), each from the connection string or else
//! PGSSLMODE, PGSSLROOTCERT, PGSSLCERT, PGSSLKEY, with libpq's defaults
//! (`prefer`; `~/.postgresql/root.crt`, `postgresql.crt`, `postgresql.key`).
//!
//! rustls with the ring provider: pure Rust apart from ring's own
//! assembly, no OpenSSL to link or match at run time, so `leaderlock` stays
//! one binary that runs wherever it was copied. `require` and stronger
//! never fall back to plaintext; `require` checks the certificate chain
//! when a root certificate file is there, as libpq does.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{ring, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SslMode {
    /// Never TLS.
    Disable,
    /// Plaintext first; TLS (unverified) if the server refuses plaintext.
    Allow,
    /// TLS (unverified) when the server offers it, else plaintext. The default.
    Prefer,
    /// TLS always; the chain is verified only when a root certificate file
    /// is there (given, or `~/.postgresql/root.crt`).
    Require,
    /// TLS, and the server's certificate chains to a trusted root.
    VerifyCa,
    /// As verify-ca, and the certificate names the host connected to.
    VerifyFull,
}

impl SslMode {
    /// Parses a value of `sslmode` (or PGSSLMODE, named by `what`).
    pub(crate) fn parse(what: &str, value: &str) -> Result<SslMode, String> {
        Ok(match value {
            "disable" => SslMode::Disable,
            "allow" => SslMode::Allow,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            _ => {
                return Err(format!(
                    "invalid {what} value {value:?}: one of disable, allow, prefer, require, \
                     verify-ca, verify-full"
                ))
            }
        })
    }
}

/// Where trusted root certificates come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootCert {
    /// A PEM file of one or more certificates.
    File(PathBuf),
    /// The operating system's trusted roots (`sslrootcert=system`).
    System,
}

/// The TLS settings of a connection, as given (defaults applied by
/// [`TlsSettings::client_config`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    pub mode: SslMode,
    pub root_cert: Option<RootCert>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

impl Default for TlsSettings {
    fn default() -> TlsSettings {
        TlsSettings {
            mode: SslMode::Prefer,
            root_cert: None,
            cert: None,
            key: None,
        }
    }
}

/// How the server's certificate is checked.
enum Check {
    /// Not at all (prefer, allow, require without a root file): what libpq
    /// does; the handshake's signature still proves the server holds the key.
    Nothing,
    /// Chains to one of the roots (verify-ca; require with a root file).
    Chain(RootCertStore),
    /// Chains, and names the host (verify-full).
    Full(RootCertStore),
}

impl TlsSettings {
    /// The settings from `params` (the connection string's `ssl*`
    /// parameters, by name) and, for each one it leaves out, the
    /// environment variable libpq reads (looked up with `env`).
    pub(crate) fn from_params(
        params: &[(String, String)],
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<TlsSettings, String> {
        let given = |name: &str, var: &str| -> Option<(String, String)> {
            params
                .iter()
                .rev()
                .find(|(k, _)| k == name)
                .map(|(_, v)| (name.to_owned(), v.clone()))
                .or_else(|| env(var).map(|v| (var.to_owned(), v)))
        };
        let mut settings = TlsSettings::default();
        if let Some((what, value)) = given("sslmode", "PGSSLMODE") {
            settings.mode = SslMode::parse(&what, &value)?;
        }
        settings.root_cert = given("sslrootcert", "PGSSLROOTCERT").map(|(_, v)| {
            if v == "system" {
                RootCert::System
            } else {
                RootCert::File(v.into())
            }
        });
        settings.cert = given("sslcert", "PGSSLCERT").map(|(_, v)| v.into());
        settings.key = given("sslkey", "PGSSLKEY").map(|(_, v)| v.into());
        Ok(settings)
    }

    /// The tokio-postgres mode of the first attempt (allow's second attempt
    /// is `Require`).
    pub(crate) fn first_attempt(&self) -> tokio_postgres::config::SslMode {
        use tokio_postgres::config::SslMode as Pg;
        match self.mode {
            SslMode::Disable | SslMode::Allow => Pg::Disable,
            SslMode::Prefer => Pg::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => Pg::Require,
        }
    }

    /// The rustls configuration these settings ask for, with every file
    /// read now: a missing or unreadable file is an error before any
    /// connection is tried.
    pub(crate) fn client_config(&self) -> Result<Arc<ClientConfig>, String> {
        let provider = Arc::new(ring::default_provider());
        let default_root = postgresql_dir().map(|d| d.join("root.crt"));
        let root_file = match &self.root_cert {
            Some(RootCert::File(path)) => Some(path.clone()),
            Some(RootCert::System) => None,
            None => default_root.clone().filter(|p| p.exists()),
        };
        if self.root_cert == Some(RootCert::System) && self.mode < SslMode::VerifyFull {
            return Err(format!(
                "weak sslmode {:?} may not be used with sslrootcert=system (use verify-full)",
                mode_name(self.mode)
            ));
        }
        let roots = || -> Result<RootCertStore, String> {
            match (&self.root_cert, &root_file) {
                (Some(RootCert::System), _) => system_roots(),
                (_, Some(path)) => roots_from_file(path),
                (_, None) => Err(format!(
                    "root certificate file {:?} does not exist: give one with sslrootcert \
                     (or PGSSLROOTCERT), use the system's trusted roots with \
                     sslrootcert=system, or use sslmode=require, which does not verify the \
                     server",
                    default_root
                        .as_deref()
                        .unwrap_or(Path::new("~/.postgresql/root.crt"))
                )),
            }
        };
        let check = match self.mode {
            SslMode::VerifyFull => Check::Full(roots()?),
            SslMode::VerifyCa => Check::Chain(roots()?),
            // libpq: "if a root CA file exists, require behaves as verify-ca"
            SslMode::Require if root_file.is_some() => Check::Chain(roots()?),
            _ => Check::Nothing,
        };
        let verifier: Arc<dyn ServerCertVerifier> = match check {
            Check::Nothing => Arc::new(NoCheck(provider.clone())),
            Check::Chain(roots) => Arc::new(ChainOnly {
                roots,
                provider: provider.clone(),
            }),
            Check::Full(roots) => rustls::client::WebPkiServerVerifier::builder_with_provider(
                Arc::new(roots),
                provider.clone(),
            )
            .build()
            .map_err(|e| format!("cannot set up certificate verification: {e}"))?,
        };
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("cannot set up TLS: {e}"))?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let config = match self.client_cert()? {
            Some((certs, key)) => builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| format!("cannot use the client certificate: {e}"))?,
            None => builder.with_no_client_auth(),
        };
        Ok(Arc::new(config))
    }

    /// The client certificate and its key: sslcert and sslkey, else
    /// `~/.postgresql/postgresql.crt` and `.key` when the certificate is
    /// there. A key file others may read is refused, as libpq does.
    #[allow(clippy::type_complexity)]
    fn client_cert(
        &self,
    ) -> Result<Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>, String> {
        if self.mode == SslMode::Disable {
            return Ok(None);
        }
        let dir = postgresql_dir();
        let cert = match &self.cert {
            Some(path) => path.clone(),
            None => match dir.as_ref().map(|d| d.join("postgresql.crt")) {
                Some(path) if path.exists() => path,
                _ => return Ok(None),
            },
        };
        let key = self
            .key
            .clone()
            .or_else(|| dir.map(|d| d.join("postgresql.key")))
            .ok_or("sslcert is given but no sslkey")?;
        let certs = CertificateDer::pem_file_iter(&cert)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| format!("cannot read certificate file {cert:?}: {e}"))?;
        if certs.is_empty() {
            return Err(format!("certificate file {cert:?} holds no certificate"));
        }
        key_file_private(&key)?;
        let key = PrivateKeyDer::from_pem_file(&key)
            .map_err(|e| format!("cannot read private key file {key:?}: {e}"))?;
        Ok(Some((certs, key)))
    }
}

fn mode_name(mode: SslMode) -> &'static str {
    match mode {
        SslMode::Disable => "disable",
        SslMode::Allow => "allow",
        SslMode::Prefer => "prefer",
        SslMode::Require => "require",
        SslMode::VerifyCa => "verify-ca",
        SslMode::VerifyFull => "verify-full",
    }
}

/// `~/.postgresql`, where libpq looks for its default files.
fn postgresql_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| Path::new(&h).join(".postgresql"))
}

fn roots_from_file(path: &Path) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("cannot read root certificate file {path:?}: {e}"))?;
    let (added, _) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(format!(
            "root certificate file {path:?} holds no usable certificate"
        ));
    }
    Ok(roots)
}

fn system_roots() -> Result<RootCertStore, String> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        return Err(format!(
            "sslrootcert=system: no trusted root certificate found on this system ({} errors)",
            found.errors.len()
        ));
    }
    Ok(roots)
}

/// libpq's rule for a private key file: u=rw (0600) or less when the user
/// owns it, u=rw,g=r (0640) or less when root does.
fn key_file_private(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path)
        .map_err(|e| format!("cannot read private key file {path:?}: {e}"))?;
    let mode = meta.mode() & 0o777;
    let ok = if meta.uid() == 0 {
        mode & 0o037 == 0
    } else {
        mode & 0o077 == 0
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "private key file {path:?} has group or world access (mode {mode:o}): it must be \
             u=rw (0600) or less, or u=rw,g=r (0640) or less if owned by root"
        ))
    }
}

/// No check of the certificate (libpq's prefer, allow, and require without
/// a root file); the handshake signature is still verified.
#[derive(Debug)]
struct NoCheck(Arc<CryptoProvider>);

impl ServerCertVerifier for NoCheck {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// verify-ca: the chain to a trusted root, whatever host it names.
#[derive(Debug)]
struct ChainOnly {
    roots: RootCertStore,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let cert = rustls::server::ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &cert,
            &self.roots,
            intermediates,
            now,
            self.provider.signature_verification_algorithms.all,
        )?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        NoCheck(self.provider.clone()).verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        NoCheck(self.provider.clone()).verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn modes_parse_as_libpq_names_them() {
        for (text, mode) in [
            ("disable", SslMode::Disable),
            ("allow", SslMode::Allow),
            ("prefer", SslMode::Prefer),
            ("require", SslMode::Require),
            ("verify-ca", SslMode::VerifyCa),
            ("verify-full", SslMode::VerifyFull),
        ] {
            assert_eq!(SslMode::parse("sslmode", text), Ok(mode));
            assert_eq!(mode_name(mode), text);
        }
        let e = SslMode::parse("sslmode", "verify_full").unwrap_err();
        assert!(e.contains("invalid sslmode value \"verify_full\""), "{e}");
    }

    #[test]
    fn system_roots_need_verify_full() {
        let s = TlsSettings::from_params(
            &params(&[("sslmode", "require"), ("sslrootcert", "system")]),
            &|_| None,
        )
        .unwrap();
        let e = s.client_config().unwrap_err();
        assert!(e.contains("weak sslmode \"require\""), "{e}");
    }

    #[test]
    fn verification_without_a_root_file_is_an_error_not_a_downgrade() {
        let s = TlsSettings::from_params(
            &params(&[
                ("sslmode", "verify-ca"),
                ("sslrootcert", "/nonexistent/root.crt"),
            ]),
            &|_| None,
        )
        .unwrap();
        let e = s.client_config().unwrap_err();
        assert!(e.contains("/nonexistent/root.crt"), "{e}");
    }

    #[test]
    fn the_last_parameter_wins_and_unverified_modes_need_no_files() {
        let s = TlsSettings::from_params(
            &params(&[("sslmode", "verify-full"), ("sslmode", "require")]),
            &|_| Some("verify-full".into()),
        )
        .unwrap();
        assert_eq!(s.mode, SslMode::Require);
        assert_eq!(s.first_attempt(), tokio_postgres::config::SslMode::Require);
        let unverified = TlsSettings {
            mode: SslMode::Prefer,
            ..TlsSettings::default()
        };
        assert!(unverified.client_config().is_ok());
    }
}
