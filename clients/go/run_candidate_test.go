package leaderlock

// The scenario suite's runner of scheduled runs (internal/runcandidate),
// killed and stopped while it runs a job, against a real server.

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runCandidateBinary: internal/runcandidate, the runs scenario's runner.
func runCandidateBinary(t *testing.T) string { return buildMain(t, "./internal/runcandidate") }

// record is a line of the runner's records.
type record struct {
	kind, id string
	term     int64
	due      time.Time
	at       float64
}

func TestScheduleRunCandidate(t *testing.T) {
	bin := runCandidateBinary(t) // removed by TestMain
	job := newKey("sched-runner")
	dir := t.TempDir()
	records := filepath.Join(dir, "records")
	var cmds []*exec.Cmd
	for _, id := range []string{"r1", "r2"} {
		logFile, err := os.Create(filepath.Join(dir, id+".log"))
		if err != nil {
			t.Fatal(err)
		}
		defer logFile.Close()
		// no misfire grace: no look back at start, the runs as they come
		cmd := exec.Command(bin, dsn(t), job, id, "300", "2", "-1", records, "0.1")
		cmd.Stdout, cmd.Stderr = logFile, logFile
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Process.Kill()
		cmds = append(cmds, cmd)
	}
	time.Sleep(1500 * time.Millisecond)
	for _, cmd := range cmds {
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	for i, cmd := range cmds {
		err := cmd.Wait()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 143 {
			log, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("r%d.log", i+1)))
			t.Errorf("runner r%d after SIGTERM: %v, want exit status 143\n%s", i+1, err, log)
		}
	}

	f, err := os.Open(records)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	line := regexp.MustCompile(`^(start|tick|lost|end) (r[12]) (\d+) (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z) (\d+\.\d{6})$`)
	var recs []record
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			t.Fatalf("record %q", sc.Text())
		}
		term, _ := strconv.ParseInt(m[3], 10, 64)
		due, err := time.Parse("2006-01-02T15:04:05.000000Z", m[4])
		if err != nil {
			t.Fatal(err)
		}
		at, _ := strconv.ParseFloat(m[5], 64)
		recs = append(recs, record{m[1], m[2], term, due, at})
	}
	// Each due instant: one start, by one runner with one term, its ticks
	// and then its end (or, for a runner's last run, lost at SIGTERM).
	type runOf struct {
		id     string
		term   int64
		ticks  int
		closed string
	}
	runs := map[int64]*runOf{} // by due instant, in microseconds
	var dues []time.Time
	for _, r := range recs {
		run := runs[r.due.UnixMicro()]
		switch {
		case r.kind == "start" && run != nil:
			t.Errorf("due instant %v started twice (%s term %d, %s term %d)", r.due, run.id, run.term, r.id, r.term)
		case r.kind == "start":
			runs[r.due.UnixMicro()] = &runOf{id: r.id, term: r.term}
			dues = append(dues, r.due)
		case run == nil || run.id != r.id || run.term != r.term || run.closed != "":
			t.Errorf("%+v: not within a run started (%+v)", r, run)
		case r.kind == "tick":
			run.ticks++
		default:
			run.closed = r.kind
		}
	}
	if len(dues) < 3 {
		t.Fatalf("%d runs in 1.5 s every 300 ms: %v", len(dues), recs)
	}
	sort.Slice(dues, func(i, j int) bool { return dues[i].Before(dues[j]) })
	rows := runRows(t, job)
	rowOf := map[int64]runRow{}
	for _, row := range rows {
		rowOf[row.due.UnixMicro()] = row
	}
	// every claim its own term (terms follow the claims' order, which is
	// almost always the due instants': docs/scheduled-runs.md)
	issued := map[int64]time.Time{}
	for _, due := range dues {
		run := runs[due.UnixMicro()]
		if due.UnixMilli()%300 != 0 {
			t.Errorf("due instant %v is not a multiple of 300 ms", due)
		}
		if other, ok := issued[run.term]; ok {
			t.Errorf("term %d issued twice: for %v and %v", run.term, other, due)
		}
		issued[run.term] = due
		if run.ticks == 0 || (run.closed != "end" && run.closed != "lost") {
			t.Errorf("run due %v: %d ticks, closed by %q", due, run.ticks, run.closed)
		}
		// a run its runner saw lost (SIGTERM at the end) returned after the
		// loss: recorded failed
		want := "succeeded"
		if run.closed == "lost" {
			want = "failed"
		}
		row, ok := rowOf[due.UnixMicro()]
		if ok && run.closed == "end" && str(row.outcome) == "failed" &&
			strings.HasPrefix(str(row.detail), "returned after the run was lost: ") {
			want = "failed" // SIGTERM between its last record and its return
		}
		if !ok || str(row.holder) != run.id || row.term == nil || *row.term != run.term || str(row.outcome) != want {
			t.Errorf("run due %v by %s term %d (closed by %q): table %+v", due, run.id, run.term, run.closed, row)
		}
	}
}
