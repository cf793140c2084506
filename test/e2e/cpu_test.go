package e2e

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// cpuSampleEvery is how often the profile samples the machine: often enough to see a test's phases (a
// membership change takes tens of seconds), rarely enough to cost nothing.
const cpuSampleEvery = 5 * time.Second

// cpuSample is the machine's CPU use over one interval, in percent of all cores, with the load average and what
// ran at its end.
type cpuSample struct {
	at                                time.Duration
	running, etcds                    int
	user, system, iowait, idle, steal float64
	load1                             float64
}

// cpuProfile samples /proc/stat and /proc/loadavg while the tier runs, with the number of tests running and of
// etcd processes (members of clusters under test, and the API server's own), into a TSV file, and sums it up at
// the end: the measurement `-parallel` is chosen from (docs/development/testing.md).
type cpuProfile struct {
	file    string
	stopped chan struct{}
	done    chan []cpuSample
}

func startCPUProfile(file string) *cpuProfile {
	p := &cpuProfile{file: file, stopped: make(chan struct{}), done: make(chan []cpuSample, 1)}
	go func() {
		var samples []cpuSample
		begin := time.Now()
		prev, _ := readCPUTimes()
		tick := time.NewTicker(cpuSampleEvery)
		defer tick.Stop()
		for {
			select {
			case <-p.stopped:
				p.done <- samples
				return
			case <-tick.C:
			}
			cur, err := readCPUTimes()
			if err != nil || prev == nil {
				prev = cur
				continue
			}
			s := cpuSample{at: time.Since(begin), running: int(running.Load()), etcds: countProcesses("etcd"), load1: readLoad1()}
			var total float64
			d := make([]float64, len(cur))
			for i := range cur {
				if i < len(prev) {
					d[i] = float64(cur[i] - prev[i])
					total += d[i]
				}
			}
			prev = cur
			if total == 0 || len(d) < 8 {
				continue
			}
			// /proc/stat: user nice system idle iowait irq softirq steal ...
			s.user = 100 * (d[0] + d[1]) / total
			s.system = 100 * (d[2] + d[5] + d[6]) / total
			s.idle = 100 * d[3] / total
			s.iowait = 100 * d[4] / total
			s.steal = 100 * d[7] / total
			samples = append(samples, s)
		}
	}()
	return p
}

// stop ends sampling, writes the samples to the profile's file and a summary to w.
func (p *cpuProfile) stop(w io.Writer) {
	close(p.stopped)
	samples := <-p.done
	if len(samples) == 0 {
		return
	}
	var b strings.Builder
	b.WriteString("seconds\ttests\tetcd_processes\tuser%\tsystem%\tiowait%\tidle%\tsteal%\tload1\n")
	for _, s := range samples {
		fmt.Fprintf(&b, "%.0f\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.2f\n", s.at.Seconds(), s.running, s.etcds, s.user, s.system, s.iowait, s.idle, s.steal, s.load1)
	}
	if err := os.WriteFile(p.file, []byte(b.String()), 0o600); err != nil {
		fmt.Fprintf(w, "CPU profile: %v\n", err)
	}
	fmt.Fprintf(w, "e2e CPU profile, %d samples every %s (%s):\n", len(samples), cpuSampleEvery, p.file)
	fmt.Fprintf(w, "  %-10s %7s %5s %7s %7s %7s %7s %8s %8s %9s\n", "tests", "samples", "etcd", "user%", "system%", "iowait%", "idle%", "load1", "load1max", "busy>=95%")
	byRunning := map[int][]cpuSample{}
	for _, s := range samples {
		byRunning[s.running] = append(byRunning[s.running], s)
	}
	var keys []int
	for k := range byRunning {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	for _, k := range keys {
		writeCPURow(w, strconv.Itoa(k)+" running", byRunning[k])
	}
	writeCPURow(w, "all", samples)
}

func writeCPURow(w io.Writer, label string, ss []cpuSample) {
	var user, system, iowait, idle, load, loadMax, etcds float64
	busy := 0
	for _, s := range ss {
		user += s.user
		system += s.system
		iowait += s.iowait
		idle += s.idle
		load += s.load1
		etcds += float64(s.etcds)
		loadMax = max(loadMax, s.load1)
		if s.idle+s.iowait < 5 {
			busy++
		}
	}
	n := float64(len(ss))
	fmt.Fprintf(w, "  %-10s %7d %5.1f %7.1f %7.1f %7.1f %7.1f %8.2f %8.2f %8.0f%%\n", label, len(ss), etcds/n, user/n, system/n, iowait/n, idle/n,
		load/n, loadMax, 100*float64(busy)/n)
}

// readCPUTimes returns the aggregate "cpu" line of /proc/stat, in clock ticks.
func readCPUTimes() ([]uint64, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] != "cpu" {
			continue
		}
		out := make([]uint64, 0, len(fields)-1)
		for _, f := range fields[1:] {
			v, err := strconv.ParseUint(f, 10, 64)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	return nil, fmt.Errorf("no cpu line in /proc/stat")
}

func readLoad1() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(data))
	if len(fields) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(fields[0], 64)
	return v
}

// countProcesses counts the processes whose command name is comm.
func countProcesses(comm string) int {
	dirs, _ := filepath.Glob("/proc/[0-9]*/comm")
	n := 0
	for _, d := range dirs {
		data, err := os.ReadFile(d) //nolint:gosec // /proc, read only
		if err == nil && strings.TrimSpace(string(data)) == comm {
			n++
		}
	}
	return n
}
