package main

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"steward.dev/steward/internal/plan"
)

// maxClassifiedLine is the longest line of etcd's log etcdLog classifies: the lines that end etcd, a stack trace
// included, take a few KiB; a longer line (a huge request in a warning) is passed on but not read.
const maxClassifiedLine = 64 << 10

// etcdLog is etcd's stderr as run-etcd passes it on to its own: every byte goes to w unchanged, and each line is
// classified as it passes (plan.ClassifyEtcdLogLine), keeping what the last line at which etcd ended said. It never
// fails a write: etcd blocks on a stderr nobody reads, and would wedge.
type etcdLog struct {
	w io.Writer
	// line is the part of the current line seen so far; long says it has outgrown maxClassifiedLine.
	line []byte
	long bool
	// reason and lastWords are those of the last line at which etcd ended (ClassifyEtcdLogLine).
	reason    plan.ExitReason
	lastWords string
}

func (l *etcdLog) Write(p []byte) (int, error) {
	n := len(p)
	_, _ = l.w.Write(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if !l.long && len(l.line)+len(chunk) <= maxClassifiedLine {
			l.line = append(l.line, chunk...)
		} else {
			l.long, l.line = true, l.line[:0]
		}
		if i < 0 {
			break
		}
		l.endLine()
		p = p[i+1:]
	}
	return n, nil
}

// endLine classifies the line seen so far and starts the next.
func (l *etcdLog) endLine() {
	if !l.long {
		if reason, words := plan.ClassifyEtcdLogLine(l.line); words != "" {
			l.reason, l.lastWords = reason, words
		}
	}
	l.line, l.long = l.line[:0], false
}

// report is the ExitReport for etcd's end with exit status code, once its stderr is closed; none for a clean exit.
// A data-loss reason counts only when etcd exited by itself (a fatal line exits 1, a panic 2): one a signal ended
// (128 + the signal) did not end on the line it logged last.
func (l *etcdLog) report(code int) (plan.ExitReport, bool) {
	l.endLine()
	if code == 0 {
		return plan.ExitReport{}, false
	}
	r := plan.ExitReport{Reason: plan.ExitEtcdFailed, ExitCode: code, Message: fmt.Sprintf("etcd exited with status %d", code)}
	if l.lastWords != "" {
		r.Message += ": " + l.lastWords
	}
	if l.reason != "" && code < 128 {
		r.Reason = l.reason
	}
	return r, true
}

// writeExitReport writes r where the kubelet takes the container's termination message from.
func writeExitReport(path string, r plan.ExitReport) {
	if err := os.WriteFile(path, plan.EncodeExitReport(r), 0o600); err != nil {
		fmt.Fprintf(os.Stderr, "steward-agent: write exit report to %s: %v\n", path, err)
	}
}
