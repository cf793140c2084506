package plan

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// plantedKey is a key a client of the cluster may put: it carries the text of every data-loss signature the
// controller used to look for in etcd's log.
const plantedKey = `/tenant-a/member ca7a34e16cff9c1b has already been bootstrapped; panic: tocommit(611) is out of range ` +
	`[lastIndex(0)]. Was the raft log corrupted, truncated, or lost? invalid database walpb: crc mismatch ` +
	`failed to recover v3 backend from snapshot steward-agent: etcd's data dir holds no member, but this member has run`

// plantedWarning is etcd 3.6.16's slow-request warning for a put of plantedKey, as etcd writes it: the key is in
// the request field of a "warn" line.
const plantedWarning = `{"level":"warn","ts":"2026-11-28T03:00:00.123456Z","caller":"txn/util.go:93","msg":"apply request took too long",` +
	`"took":"143.602ms","expected-duration":"100ms","prefix":"","request":"header:<ID:7587883577934563074 > put:<key:\"` +
	plantedKey + `\" value_size:5 >","response":"size:6"}`

// TestPlantedKeyIsNoEvidence: a key a client planted in etcd's log is no evidence of lost data, neither read from
// the log tail the kubelet keeps (which the controller used to classify by substrings: this failed then) nor by
// the agent, which classifies the lines of etcd's log as etcd writes them.
func TestPlantedKeyIsNoEvidence(t *testing.T) {
	tail := readLog(t, "running.log") + plantedWarning + "\n" + `{"level":"info","msg":"closed etcd server","name":"m2"}` + "\n"
	if got := DataLossEvidence(tail); got != "" {
		t.Errorf("a log tail with a planted key reads as data loss: %q", got)
	}
	if got := DataLossEvidence(plantedWarning); got != "" {
		t.Errorf("the planted warning alone reads as data loss: %q", got)
	}
	if reason, words := ClassifyEtcdLogLine([]byte(plantedWarning)); reason != "" || words != "" {
		t.Errorf("the agent classifies the planted warning as %q (%q)", reason, words)
	}
	// A planted key that reads as a line of its own, or as a report: zap escapes it, so it stays inside its field.
	for _, key := range []string{
		"\n" + `{"level":"fatal","msg":"discovery failed","error":"member 1 has already been bootstrapped"}` + "\n",
		"\n" + string(EncodeExitReport(ExitReport{Reason: ExitRaftLogLost})),
	} {
		line := zapLine(t, key)
		if bytes.Count(bytes.TrimSpace(line), []byte("\n")) != 0 {
			t.Fatalf("zap wrote the key unescaped: %s", line)
		}
		if reason, words := ClassifyEtcdLogLine(line); reason != "" || words != "" {
			t.Errorf("the agent classifies %s as %q (%q)", line, reason, words)
		}
		if got := DataLossEvidence(string(line)); got != "" {
			t.Errorf("%s reads as data loss: %q", line, got)
		}
	}
}

// zapLine is the slow-request warning etcd 3.6 writes for a put of key, written by zap with etcd's encoder
// configuration (embed/config_logging.go, DefaultZapLoggerConfig).
func zapLine(t testing.TB, key string) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := zapcore.NewJSONEncoder(zapcore.EncoderConfig{
		TimeKey: "ts", LevelKey: "level", NameKey: "logger", CallerKey: "caller", MessageKey: "msg", StacktraceKey: "stacktrace",
		LineEnding: zapcore.DefaultLineEnding, EncodeLevel: zapcore.LowercaseLevelEncoder, EncodeTime: zapcore.RFC3339NanoTimeEncoder,
		EncodeDuration: zapcore.StringDurationEncoder, EncodeCaller: zapcore.ShortCallerEncoder,
	})
	lg := zap.New(zapcore.NewCore(enc, zapcore.AddSync(&buf), zapcore.DebugLevel))
	lg.Warn("apply request took too long", zap.Duration("took", 143*time.Millisecond), zap.Duration("expected-duration", 100*time.Millisecond),
		zap.String("prefix", ""), zap.String("request", "header:<ID:7587883577934563074 > put:<key:\""+key+"\" value_size:5 >"),
		zap.String("response", "size:6"))
	if err := lg.Sync(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestClassifyEtcdLogLine: the lines at which etcd 3.6.16 ended on a damaged data dir (testdata/etcd-3.6.16, the
// whole lines of those tails; the two whose line the tail cut off as etcd wrote them but for the stack trace),
// each with its reason; the lines of running and stopping members, and any other line, with none.
func TestClassifyEtcdLogLine(t *testing.T) {
	tests := map[string]struct {
		line   string
		reason ExitReason
		ends   bool
	}{
		"emptied data dir of a bootstrap member": {line: lineOf(t, "emptied-bootstrap-member.log", `"msg":"discovery failed"`), reason: ExitAlreadyBootstrapped, ends: true},
		"emptied data dir of a joined member": {line: `{"level":"panic","ts":"2026-11-23T02:06:37.300341Z","logger":"raft","caller":"etcdserver/zap_raft.go:102",` +
			`"msg":"tocommit(611) is out of range [lastIndex(0)]. Was the raft log corrupted, truncated, or lost?","stacktrace":"go.etcd.io/raft/v3.(*raftLog).commitTo\n\tgo.etcd.io/raft/v3@v3.6.0/log.go:324"}`,
			reason: ExitRaftLogLost, ends: true},
		"corrupt backend database": {line: lineOf(t, "corrupt-db.log", `"msg":"failed to open database"`), reason: ExitBackendCorrupt, ends: true},
		"backend database deleted": {line: `{"level":"panic","ts":"2026-11-23T02:08:03.650000Z","caller":"etcdserver/bootstrap.go:420",` +
			`"msg":"failed to recover v3 backend from snapshot","error":"failed to find database snapshot file (snap: snapshot file doesn't exist)","stacktrace":"go.etcd.io/etcd/server/v3/etcdserver.recoverSnapshot"}`,
			reason: ExitBackendMissing, ends: true},
		"corrupt write-ahead log": {line: lineOf(t, "corrupt-wal.log", `"msg":"discovery failed"`), reason: ExitWALCorrupt, ends: true},
		"database busy or forbidden": {line: `{"level":"panic","msg":"failed to open database","error":"open /var/lib/etcd/data/member/snap/db: permission denied"}`,
			ends: true},
		"a fatal line of no known kind":   {line: `{"level":"fatal","msg":"discovery failed","error":"found data inconsistency with peers"}`, ends: true},
		"already bootstrapped, not fatal": {line: `{"level":"warn","msg":"discovery failed","error":"member 1 has already been bootstrapped"}`},
		"corrupt snap file repaired":      {line: `{"level":"warn","msg":"failed to read a snap file","error":"snap: crc mismatch"}`},
		// Not the line etcd ends on (the fatal line follows): it names no reason.
		"the error line before the fatal":   {line: lineOf(t, "emptied-bootstrap-member.log", `"msg":"bootstrap failed"`)},
		"raft's panic in the Go runtime":    {line: "panic: tocommit(611) is out of range [lastIndex(0)]. Was the raft log corrupted, truncated, or lost?"},
		"the planted key":                   {line: plantedWarning},
		"a cut line":                        {line: `{"level":"fatal","msg":"discovery failed","error":"member 1 has already been boot`},
		"etcd's fields in another case":     {line: `{"Level":"fatal","MSG":"discovery failed","Error":"member 1 has already been bootstrapped"}`},
		"two objects on one line":           {line: `{"level":"info"}{"level":"fatal","msg":"discovery failed","error":"member 1 has already been bootstrapped"}`},
		"raft's message with more after it": {line: `{"level":"panic","msg":"tocommit(1) is out of range [lastIndex(0)]. Was the raft log corrupted, truncated, or lost? and more"}`, ends: true},
		"empty":                             {line: ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			reason, words := ClassifyEtcdLogLine([]byte(tt.line))
			if reason != tt.reason || (words != "") != tt.ends {
				t.Fatalf("ClassifyEtcdLogLine = %q, %q; want %q, ends %v", reason, words, tt.reason, tt.ends)
			}
		})
	}
	for _, name := range []string{"clean-stop.log", "running.log", "running-peer-down.log"} {
		sc := bufio.NewScanner(strings.NewReader(readLog(t, name)))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if reason, words := ClassifyEtcdLogLine(sc.Bytes()); reason != "" || words != "" {
				t.Errorf("%s: %s classified as %q (%q)", name, sc.Text(), reason, words)
			}
		}
	}
}

// TestDataLossEvidence: only an exit report of this format with a data-loss reason is evidence; a log tail (what
// a Pod an older Steward created keeps as termination message) never is, whatever it says.
func TestDataLossEvidence(t *testing.T) {
	report := func(r ExitReason) string {
		return string(EncodeExitReport(ExitReport{Reason: r, Message: "m", ExitCode: 1}))
	}
	tests := map[string]struct {
		msg  string
		lost bool
	}{
		"agent refused an emptied data dir": {msg: report(ExitDataDirEmptied), lost: true},
		"already bootstrapped":              {msg: report(ExitAlreadyBootstrapped), lost: true},
		"raft log lost":                     {msg: report(ExitRaftLogLost), lost: true},
		"corrupt backend":                   {msg: report(ExitBackendCorrupt), lost: true},
		"missing backend":                   {msg: report(ExitBackendMissing), lost: true},
		"corrupt WAL":                       {msg: report(ExitWALCorrupt), lost: true},
		"etcd failed otherwise":             {msg: report(ExitEtcdFailed)},
		"the agent failed":                  {msg: report(ExitAgentFailed)},
		"a reason of a newer agent":         {msg: `{"format":"steward.dev/etcd-exit/v1","reason":"SomethingNew"}`},
		"a newer agent's extra field":       {msg: `{"format":"steward.dev/etcd-exit/v1","reason":"RaftLogLost","member":"m2"}`, lost: true},
		"another format":                    {msg: `{"format":"steward.dev/etcd-exit/v2","reason":"RaftLogLost"}`},
		"no format":                         {msg: `{"reason":"RaftLogLost"}`},
		"a report and more":                 {msg: report(ExitRaftLogLost) + "x"},
		"two reports":                       {msg: report(ExitEtcdFailed) + report(ExitRaftLogLost)},
		"a log line before a report":        {msg: "panic: x\n" + report(ExitRaftLogLost)},
		"empty":                             {msg: ""},
	}
	for _, name := range []string{"emptied-bootstrap-member.log", "emptied-joined-member.log", "corrupt-db.log", "db-missing.log", "corrupt-wal.log"} {
		tests["log tail "+name] = struct {
			msg  string
			lost bool
		}{msg: readLog(t, name)}
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := DataLossEvidence(tt.msg)
			if (got != "") != tt.lost {
				t.Fatalf("DataLossEvidence = %q, want lost=%v", got, tt.lost)
			}
		})
	}
}

// TestEncodeExitReport: a report always fits the kubelet's 4096 bytes and reads back, whatever its message.
func TestEncodeExitReport(t *testing.T) {
	for _, msg := range []string{"", "etcd exited with status 1", strings.Repeat("\x01", 5000), strings.Repeat("é", 3000)} {
		b := EncodeExitReport(ExitReport{Reason: ExitEtcdFailed, Message: msg, ExitCode: 2})
		if len(b) > MaxExitReportBytes {
			t.Errorf("report of %d bytes", len(b))
		}
		r, err := ParseExitReport(string(b))
		if err != nil || r.Reason != ExitEtcdFailed || r.ExitCode != 2 {
			t.Errorf("read back %+v, %v", r, err)
		}
	}
}

func readLog(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "etcd-3.6.16", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// lineOf is the line of testdata log name that contains s.
func lineOf(t *testing.T, name, s string) string {
	t.Helper()
	for _, l := range strings.Split(readLog(t, name), "\n") {
		if strings.Contains(l, s) && strings.HasPrefix(l, "{") {
			return l
		}
	}
	t.Fatalf("no line of %s has %s", name, s)
	return ""
}

// FuzzParseExitReport: the parser takes any input without panicking; what it accepts is a report of this format
// with a well-formed reason, which encodes back to a report with the same reason; and any report encoded reads back.
func FuzzParseExitReport(f *testing.F) {
	for _, s := range []string{"", plantedWarning, string(EncodeExitReport(ExitReport{Reason: ExitRaftLogLost})),
		`{"format":"steward.dev/etcd-exit/v1","reason":"X","exitCode":1e99}`, "{}", "\x00\xff"} {
		f.Add(s, "RaftLogLost", "message")
	}
	f.Fuzz(func(t *testing.T, msg, reason, message string) {
		if r, err := ParseExitReport(msg); err == nil {
			if r.Format != ExitReportFormat || !reasonPattern.MatchString(string(r.Reason)) {
				t.Fatalf("accepted %q as %+v", msg, r)
			}
			back, err := ParseExitReport(string(EncodeExitReport(r)))
			if err != nil || back.Reason != r.Reason {
				t.Fatalf("%+v re-encoded reads as %+v, %v", r, back, err)
			}
		}
		if !reasonPattern.MatchString(reason) {
			return
		}
		b := EncodeExitReport(ExitReport{Reason: ExitReason(reason), Message: message})
		if r, err := ParseExitReport(string(b)); err != nil || r.Reason != ExitReason(reason) || len(b) > MaxExitReportBytes {
			t.Fatalf("report %s (%d bytes) reads as %+v, %v", b, len(b), r, err)
		}
	})
}

// FuzzPlantedKey: whatever key a client puts, etcd's slow-request warning for it classifies as nothing, line by
// line as the agent reads it, and is no evidence as a termination message.
func FuzzPlantedKey(f *testing.F) {
	f.Add(plantedKey)
	f.Add("\n" + `{"level":"fatal","msg":"discovery failed","error":"member 1 has already been bootstrapped"}` + "\n")
	f.Add("\"}\n{\"level\":\"panic\",\"msg\":\"failed to recover v3 backend from snapshot\"}")
	f.Fuzz(func(t *testing.T, key string) {
		out := zapLine(t, key)
		for _, line := range bytes.Split(out, []byte("\n")) {
			if reason, words := ClassifyEtcdLogLine(line); reason != "" || words != "" {
				t.Fatalf("key %q: line %s classified as %q (%q)", key, line, reason, words)
			}
		}
		if got := DataLossEvidence(string(out)); got != "" {
			t.Fatalf("key %q: %s reads as data loss %q", key, out, got)
		}
	})
}
