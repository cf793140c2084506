package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// ExitReport is what `steward-agent run-etcd`, the entrypoint of a member's etcd container, writes as the
// container's termination message when it refuses to start etcd or etcd exits with an error: one line of JSON,
// the only evidence of a member's crash the controller reads (never etcd's log, whose text a client can put keys
// into). Newer agents may add reasons and fields: a reason this release does not know is no evidence of anything,
// and unknown fields are ignored; a change that old readers must not misread gets a new Format.
type ExitReport struct {
	// Format is ExitReportFormat: what tells a report from any other text in a termination message.
	Format string `json:"format"`
	// Reason is a CamelCase code (the ExitReason constants).
	Reason ExitReason `json:"reason"`
	// Message is for humans: what the agent saw, which nothing decides on.
	Message string `json:"message,omitempty"`
	// ExitCode is etcd's exit status (128 + the signal when a signal ended it); 0 when etcd did not run.
	ExitCode int `json:"exitCode,omitempty"`
}

// ExitReportFormat identifies version 1 of ExitReport.
const ExitReportFormat = "steward.dev/etcd-exit/v1"

// ExitReason says why a member's etcd container ended.
type ExitReason string

// Reasons of an ExitReport. The data-loss ones (DataLossEvidence) each mean that restarting the member cannot
// help and that it must not rejoin under its old member ID.
const (
	// ExitDataDirEmptied: the agent refused to start etcd because the data dir holds no member although the member
	// has run (the data dir was emptied on an intact volume).
	ExitDataDirEmptied ExitReason = "DataDirEmptied"
	// ExitAlreadyBootstrapped: a bootstrap member's etcd started on an empty data dir and its peers told it that it
	// has run ("member ... has already been bootstrapped").
	ExitAlreadyBootstrapped ExitReason = "AlreadyBootstrapped"
	// ExitRaftLogLost: the leader's commit index is beyond the member's log (raft's "Was the raft log corrupted,
	// truncated, or lost?" panic): the data dir of a member that joined later was emptied.
	ExitRaftLogLost ExitReason = "RaftLogLost"
	// ExitBackendCorrupt: the backend database (bbolt) is not a database ("invalid database").
	ExitBackendCorrupt ExitReason = "BackendCorrupt"
	// ExitBackendMissing: the backend database is gone or older than the member's snapshot.
	ExitBackendMissing ExitReason = "BackendMissing"
	// ExitWALCorrupt: a write-ahead log record's checksum does not match.
	ExitWALCorrupt ExitReason = "WALCorrupt"
	// ExitEtcdFailed: etcd exited with an error of no kind above; a restart may fix it.
	ExitEtcdFailed ExitReason = "EtcdFailed"
	// ExitAgentFailed: the agent could not start etcd (or listen for its probes).
	ExitAgentFailed ExitReason = "AgentFailed"
)

// dataLossEvidence is what each data-loss reason tells the planner (and a human, in the removal's Event).
var dataLossEvidence = map[ExitReason]string{
	ExitDataDirEmptied:      "data dir empty, but this member has run (steward-agent refused to start etcd)",
	ExitAlreadyBootstrapped: "data dir empty, but the cluster knows this member has run",
	ExitRaftLogLost:         "raft log lost: the leader's commit index is beyond the member's log",
	ExitBackendCorrupt:      "backend database corrupt (invalid database)",
	ExitBackendMissing:      "backend database missing or older than the member's snapshot",
	ExitWALCorrupt:          "write-ahead log corrupt (crc mismatch)",
}

// MaxExitReportBytes is the most of a termination message the kubelet keeps; a longer report would be cut and
// no longer parse.
const MaxExitReportBytes = 4096

// maxExitMessage bounds ExitReport.Message inside MaxExitReportBytes, escapes included (at most six bytes each).
const maxExitMessage = 512

// EncodeExitReport renders r (with its Format set) as one line of JSON, its message shortened to fit.
func EncodeExitReport(r ExitReport) []byte {
	r.Format = ExitReportFormat
	if len(r.Message) > maxExitMessage {
		r.Message = strings.ToValidUTF8(r.Message[:maxExitMessage], "") + "..."
	}
	b, err := json.Marshal(r)
	if err != nil {
		// Strings and an int only: Marshal cannot fail.
		panic(fmt.Sprintf("encode exit report: %v", err))
	}
	return append(b, '\n')
}

// errNoExitReport: the termination message is not an ExitReport (empty, or anything else: a log tail of a Pod
// that an older Steward created, with etcd started without the agent).
var errNoExitReport = errors.New("no exit report in termination message")

// reasonPattern is what a reason looks like: CamelCase letters, bounded.
var reasonPattern = regexp.MustCompile(`^[A-Z][A-Za-z]{0,63}$`)

// ParseExitReport reads a termination message as an ExitReport. Strict about what decides: the whole message is
// one JSON object (surrounding white space aside) of this Format with a well-formed reason; unknown fields, from
// a newer agent, are ignored.
func ParseExitReport(msg string) (ExitReport, error) {
	msg = strings.TrimSpace(msg)
	if !strings.HasPrefix(msg, "{") {
		return ExitReport{}, errNoExitReport
	}
	var r ExitReport
	dec := json.NewDecoder(strings.NewReader(msg))
	if err := dec.Decode(&r); err != nil {
		return ExitReport{}, fmt.Errorf("parse exit report: %w", err)
	}
	if dec.InputOffset() != int64(len(msg)) {
		return ExitReport{}, errors.New("parse exit report: trailing data after the report")
	}
	if r.Format != ExitReportFormat {
		return ExitReport{}, fmt.Errorf("parse exit report: format %q, want %q", r.Format, ExitReportFormat)
	}
	if !reasonPattern.MatchString(string(r.Reason)) {
		return ExitReport{}, fmt.Errorf("parse exit report: reason %q is not a CamelCase code", r.Reason)
	}
	return r, nil
}

// etcdLogLine are the fields of one line of etcd's structured (zap JSON) log that classify it, read by their exact
// names (encoding/json alone would also take "MSG" or "Level"). Only etcd decides their values: what a client
// sends (keys, values, requests) appears in other fields, JSON-escaped, so it can neither end the line nor set
// these.
type etcdLogLine struct{ Level, Msg, Error string }

// parseEtcdLogLine reads line as one zap JSON object; false for anything else.
func parseEtcdLogLine(line []byte) (etcdLogLine, bool) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' || !utf8.Valid(line) {
		return etcdLogLine{}, false
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil {
		return etcdLogLine{}, false
	}
	str := func(name string) string {
		var v string
		if raw, ok := fields[name]; ok && json.Unmarshal(raw, &v) == nil {
			return v
		}
		return ""
	}
	return etcdLogLine{Level: str("level"), Msg: str("msg"), Error: str("error")}, true
}

// etcdFatal are the levels at which etcd's logger ends the process (zap's Fatal exits, Panic panics): a line at
// another level is never a cause of etcd's end.
func etcdFatal(level string) bool { return level == "fatal" || level == "panic" || level == "dpanic" }

// raftLogLost is raft's panic when a leader commits past the end of a follower's log (raft log.go commitTo).
var raftLogLost = regexp.MustCompile(`^tocommit\(\d+\) is out of range \[lastIndex\(\d+\)\]\. Was the raft log corrupted, truncated, or lost\?$`)

// alreadyBootstrapped is etcd's error when a member of a new cluster starts empty but its peers know it.
var alreadyBootstrapped = regexp.MustCompile(`^member [0-9a-f]{1,16} has already been bootstrapped$`)

// ClassifyEtcdLogLine classifies one line of etcd's log (3.5 and 3.6, which log zap JSON). lastWords is etcd's
// msg and error of a line at which etcd ends (fatal or panic), for humans, "" for any other line, including text
// that is not a JSON object; reason is the data-loss reason such a line gives, "" when it gives none. It decides
// on etcd's level, msg and error fields only, each matched whole: a client's key in a slow request's
// warning is in another field of a "warn" line, so however it reads it classifies as nothing. The signatures were
// each seen running etcd 3.6.16 on a damaged data dir (testdata/etcd-3.6.16). Deliberately absent: a corrupt snap
// file and a torn WAL tail, which etcd repairs itself, and "failed to open database" for any other error than
// bbolt's "invalid database" (a permission problem fails the same way).
func ClassifyEtcdLogLine(line []byte) (reason ExitReason, lastWords string) {
	l, ok := parseEtcdLogLine(line)
	if !ok || !etcdFatal(l.Level) {
		return "", ""
	}
	lastWords = l.Msg
	if l.Error != "" {
		lastWords += ": " + l.Error
	}
	switch {
	case raftLogLost.MatchString(l.Msg):
		reason = ExitRaftLogLost
	case (l.Msg == "discovery failed" || l.Msg == "bootstrap failed") && alreadyBootstrapped.MatchString(l.Error):
		reason = ExitAlreadyBootstrapped
	case l.Msg == "failed to open database" && l.Error == "invalid database":
		reason = ExitBackendCorrupt
	case l.Msg == "failed to recover v3 backend from snapshot":
		reason = ExitBackendMissing
	case (l.Msg == "discovery failed" || l.Msg == "bootstrap failed") && strings.HasPrefix(l.Error, "walpb: crc mismatch"):
		reason = ExitWALCorrupt
	}
	return reason, lastWords
}
