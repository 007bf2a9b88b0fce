package leaderlock

// The README's idiom as a separate process: internal/candidate (the
// scenario suite's candidate), built once with the go command that runs
// these tests, in the same module mode. Processes can be paused (SIGSTOP)
// and stopped (SIGTERM) as an operator or a kernel would.

import (
	"bufio"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A main package of internal/, built once per test binary.
type builtBinary struct {
	once sync.Once
	path string // the binary, or the go command's output when err is set
	err  error
}

var built sync.Map // package path -> *builtBinary

// buildMain builds the main package pkg (./internal/...) once per test binary.
func buildMain(t *testing.T, pkg string) string {
	t.Helper()
	v, _ := built.LoadOrStore(pkg, &builtBinary{})
	b := v.(*builtBinary)
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "leaderlock-go-"+filepath.Base(pkg)+"-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, filepath.Base(pkg))
		if out, err := exec.Command("go", "build", "-o", b.path, pkg).CombinedOutput(); err != nil {
			b.err, b.path = err, string(out)
		}
	})
	if b.err != nil {
		t.Fatalf("building %s: %v\n%s", pkg, b.err, b.path)
	}
	return b.path
}

// candidateBinary: internal/candidate, the scenario suite's candidate.
func candidateBinary(t *testing.T) string { return buildMain(t, "./internal/candidate") }

func TestMain(m *testing.M) {
	rand.Seed(time.Now().UnixNano()) // newKey: keys of their own in each run
	code := m.Run()
	built.Range(func(_, v any) bool {
		if b := v.(*builtBinary); b.err == nil && b.path != "" {
			os.RemoveAll(filepath.Dir(b.path))
		}
		return true
	})
	os.Exit(code)
}

type candidate struct {
	id     string
	cmd    *exec.Cmd
	log    string
	exited chan struct{} // closed when the process has exited, with err
	err    error
}

// startCandidate runs the candidate for key as id; its output goes to a
// log file shown when the test fails.
func startCandidate(t *testing.T, key, id string, ttl time.Duration, records string) *candidate {
	t.Helper()
	logPath := filepath.Join(filepath.Dir(records), id+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(candidateBinary(t), dsn(t), key, id, strconv.FormatFloat(ttl.Seconds(), 'f', -1, 64), records, "runordie")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &candidate{id: id, cmd: cmd, log: logPath, exited: make(chan struct{})}
	go func() { c.err = cmd.Wait(); logFile.Close(); close(c.exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-c.exited
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			t.Logf("%s's log:\n%s", id, out)
		}
	})
	return c
}

func (c *candidate) signal(t *testing.T, s syscall.Signal) {
	t.Helper()
	if err := c.cmd.Process.Signal(s); err != nil {
		t.Fatal(err)
	}
}

type tick struct {
	at   time.Time
	id   string
	term int64
}

// readTicks parses the records: "tick ID TERM UNIX_SECONDS" lines.
func readTicks(t *testing.T, records string) []tick {
	t.Helper()
	f, err := os.Open(records)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []tick
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		p := strings.Fields(sc.Text())
		if len(p) != 4 || p[0] != "tick" {
			continue
		}
		term, err1 := strconv.ParseInt(p[2], 10, 64)
		secs, err2 := strconv.ParseFloat(p[3], 64)
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, tick{at: time.Unix(0, int64(secs*1e9)), id: p[1], term: term})
	}
	return out
}

// lastTicker is the id of the last tick's candidate, or "".
func lastTicker(t *testing.T, records string) string {
	ts := readTicks(t, records)
	if len(ts) == 0 {
		return ""
	}
	return ts[len(ts)-1].id
}
