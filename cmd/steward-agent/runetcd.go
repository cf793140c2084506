package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"steward.dev/steward/internal/plan"
)

// RefusedEmptyDataDir begins the message run-etcd prints when it refuses to start etcd; the controller reads the
// refusal from the plan.ExitReport (plan.ExitDataDirEmptied) in the container's termination message.
const RefusedEmptyDataDir = "steward-agent: etcd's data dir holds no member, but this member has run"

// probeWait is how long a readiness probe of a starting etcd waits for it to pass (memberProbes): under the
// probe's timeout (2 s, resources.MemberPod) and its 1 s period, so the kubelet's next probe follows within a
// tenth of a second and probes that fail still come one a period, each counting as one of the window's failures.
const probeWait = 900 * time.Millisecond

// runEtcd is `steward-agent run-etcd`, the entrypoint of a member's etcd container: it starts etcd (the command
// after its own flags), passes signals on to it and exits as it does, unless the data dir holds no member although
// the member has run, in which case etcd is not started. With --probe-listen it answers the kubelet's readiness and
// liveness probes for etcd (memberProbes); with --bootstrap-after, a member of a new cluster waits for the
// members ranked before it to serve before its first start (awaitPeersBootstrapped).
//
// Why: a member whose data dir was emptied (its volume intact) must never come back under its old identity, which
// would let it vote without the entries it acknowledged. etcd does not stop that by itself: a member that joined a
// running cluster panics once on an empty data dir, leaves a new write-ahead log behind, and on the next start
// gets a snapshot from the leader; a member that bootstrapped alone starts an empty cluster. "Has run" is known
// off the data volume, which an emptying takes with it: --has-run (Steward re-creates the Pod of a member that has
// run) or the mark this Pod's earlier container left once etcd's data dir held the member (--mark, on an emptyDir,
// which outlives the container's restarts).
//
// Why it reports: whatever ends etcd with an error, the agent writes a plan.ExitReport to --exit-report (the
// container's termination message file), the only account of the crash the controller reads. The reason of a
// crash that means lost data (plan.DataLossEvidence) comes from etcd's own log, read line by line as etcd writes
// it to stderr (etcdLog), by its structured fields only (plan.ClassifyEtcdLogLine).
func runEtcd(args []string) int {
	f, ok := parseRunEtcd(args)
	if !ok {
		return 2
	}
	holds := holdsMember(f.dataDir)
	marked := fileExists(f.mark)
	if why := refuseEmptyDataDir(holds, marked, f.hasRun); why != "" {
		msg := fmt.Sprintf("%s (%s): refusing to start etcd, which would rejoin under its old member ID without the entries it acknowledged; Steward replaces the member", RefusedEmptyDataDir, why)
		fmt.Fprintln(os.Stderr, msg)
		writeExitReport(f.report, plan.ExitReport{Reason: plan.ExitDataDirEmptied, Message: msg})
		return 1
	}
	if f.probes != "" {
		// Listening before etcd starts: the kubelet's first probes then wait for etcd instead of failing.
		ln, err := net.Listen("tcp", f.probes)
		if err != nil {
			msg := fmt.Sprintf("steward-agent: listen for probes on %s: %v", f.probes, err)
			fmt.Fprintln(os.Stderr, msg)
			writeExitReport(f.report, plan.ExitReport{Reason: plan.ExitAgentFailed, Message: msg})
			return 1
		}
		server := &http.Server{Handler: newMemberProbes(f.etcdURL, probeWait, f.grace), ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = server.Serve(ln) }()
		defer func() { _ = server.Close() }()
	}
	if !holds && f.after != "" {
		logBootstrapWait(awaitPeersBootstrapped(strings.Split(f.after, ","), f.limit, 20*time.Millisecond))
	}
	return f.superviseEtcd(marked)
}

// runEtcdFlags are run-etcd's flags, and etcd's command line after them.
type runEtcdFlags struct {
	dataDir, mark string
	hasRun        bool
	probes        string
	etcdURL       string
	grace         time.Duration
	after         string
	limit         time.Duration
	report        string
	command       []string
}

// parseRunEtcd reads run-etcd's command line; false when it is unusable (the usage is printed).
func parseRunEtcd(args []string) (*runEtcdFlags, bool) {
	f := &runEtcdFlags{}
	fs := flag.NewFlagSet("run-etcd", flag.ContinueOnError)
	fs.StringVar(&f.dataDir, "guard-data-dir", "", "etcd's data dir")
	fs.StringVar(&f.mark, "guard-mark", "", "a file off the data volume that records that the data dir held the member in this Pod")
	fs.BoolVar(&f.hasRun, "guard-has-run", false, "the member has run before this Pod (a Pod re-created on its volume)")
	fs.StringVar(&f.probes, "probe-listen", "", "address to answer the kubelet's readiness and liveness probes on, for etcd (memberProbes); none if empty")
	fs.StringVar(&f.etcdURL, "probe-etcd", "http://127.0.0.1:2381", "etcd's plain HTTP health base URL, which the probes are passed on to")
	fs.DurationVar(&f.grace, "probe-start-grace", 5*time.Minute, "how long etcd may take to start before the liveness probe goes by its /livez")
	fs.StringVar(&f.after, "bootstrap-after", "", "peer URLs (comma-separated) of the members of a new cluster ranked before this one, which a first start waits to serve (awaitPeersBootstrapped)")
	fs.DurationVar(&f.limit, "bootstrap-wait-limit", 2*time.Second, "how long a first start waits for --bootstrap-after's members at most")
	fs.StringVar(&f.report, "exit-report", "/dev/termination-log", "where to write why etcd ended or was not started (plan.ExitReport), the container's termination message file")
	if err := fs.Parse(args); err != nil {
		return nil, false
	}
	f.command = fs.Args()
	if f.dataDir == "" || f.mark == "" || len(f.command) == 0 {
		fmt.Fprintln(os.Stderr, "usage: steward-agent run-etcd --guard-data-dir=DIR --guard-mark=FILE [--guard-has-run] -- ETCD [FLAGS]")
		return nil, false
	}
	return f, true
}

// superviseEtcd starts etcd, passes the signals it gets on to it, writes the mark once the data dir holds the
// member, and returns etcd's exit code, with an exit report when etcd ended with an error.
func (f *runEtcdFlags) superviseEtcd(marked bool) int {
	cmd := exec.Command(f.command[0], f.command[1:]...) //nolint:gosec // the Pod spec's own command
	etcdStderr := &etcdLog{w: os.Stderr}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, etcdStderr
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(signals)
	if err := cmd.Start(); err != nil {
		msg := fmt.Sprintf("steward-agent: start %s: %v", f.command[0], err)
		fmt.Fprintln(os.Stderr, msg)
		writeExitReport(f.report, plan.ExitReport{Reason: plan.ExitAgentFailed, Message: msg})
		return 1
	}
	done := make(chan error, 1)
	stopped := false
	go func() { done <- cmd.Wait() }()
	// The mark is written once the data dir holds the member: at once on a restart or a restored data dir, within
	// a second of etcd creating it on a first start.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if !marked && holdsMember(f.dataDir) {
			if err := os.WriteFile(f.mark, []byte("etcd's data dir held the member\n"), 0o600); err != nil {
				fmt.Fprintf(os.Stderr, "steward-agent: write %s: %v\n", f.mark, err)
			} else {
				marked = true
			}
		}
		select {
		case s := <-signals:
			stopped = true
			_ = cmd.Process.Signal(s)
		case err := <-done:
			code := exitCode(err)
			// etcd stopped by the signal passed on (the kubelet's SIGTERM) ends by that signal, 143: a stop, no
			// crash to report.
			if r, ok := etcdStderr.report(code); ok && (!stopped || code <= 128) {
				writeExitReport(f.report, r)
			}
			return code
		case <-tick.C:
		}
	}
}

// refuseEmptyDataDir says why etcd must not start, "" when it may: a data dir that holds no member is a first
// start, unless the member has run.
func refuseEmptyDataDir(holdsMember, marked, hasRun bool) string {
	switch {
	case holdsMember:
		return ""
	case marked:
		return "an earlier start in this Pod found it holding the member"
	case hasRun:
		return "this Pod was re-created on the volume of a member that has run"
	}
	return ""
}

// exitCode is the status run-etcd exits with for etcd's end: its own, or 128 + the signal that ended it.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return exit.ExitCode()
	}
	fmt.Fprintf(os.Stderr, "steward-agent: wait for etcd: %v\n", err)
	return 1
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
