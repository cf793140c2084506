package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"text/template"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"steward.dev/steward/internal/testbed"
)

// A benchmark result is one section of docs/development/benchmarks.md, between markers, so a run replaces the sections it
// measured and keeps the others (the cold start is only measured on request: it takes half an hour).
type section struct {
	name string
	body string
}

// sectionsText is the prose of benchmarks.md: one template per section (named as the section), the page's header
// and the stamp under each section, in Markdown, so that it is edited as the page is read; the bench fills in
// what it measured.
//
//go:embed sections.md.tmpl
var sectionsText string

var sectionTemplates = template.Must(template.New("sections").Option("missingkey=error").Parse(sectionsText))

// render is section name, its template filled in with values.
func render(name string, values map[string]any) (section, error) {
	body, err := renderText(name, values)
	return section{name, body}, err
}

// renderText is template name of sections.md.tmpl filled in with values.
func renderText(name string, values map[string]any) (string, error) {
	var b strings.Builder
	if err := sectionTemplates.ExecuteTemplate(&b, name, values); err != nil {
		return "", fmt.Errorf("render %s: %w", name, err)
	}
	return b.String(), nil
}

func bench(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	opts := testbed.RegisterFlags(fs)
	out := fs.String("out", "docs/development/benchmarks.md", "file to write the results into")
	runs := fs.Int("runs", 5, "repetitions of each measurement")
	cold := fs.Bool("cold", false, "also measure a cold start: empty Go module and build caches and binary cache (about 30 minutes)")
	only := fs.String("only", "", "measure only these sections (comma-separated: etcd-start, takeover, cluster-create, scale, upgrade, tls-switch, backup-restore, pod-loss, metrics-scrape, storage, defrag, pitr, fleet, data-path, under-load, hibernate, backup-formats, adopt; warm-start is measured when -only is empty or names it); the others in the file are kept")
	extra := fs.String("operator-flags", "", "extra flags for the operator process (space-separated), e.g. --max-concurrent-reconciles=1")
	_ = fs.Parse(args)
	operatorFlags = strings.Fields(*extra)
	want := func(name string) bool { return *only == "" || strings.Contains(","+*only+",", ","+name+",") }

	var sections []section
	if *cold {
		s, err := benchColdStart(ctx, *opts)
		if err != nil {
			return err
		}
		sections = append(sections, s)
	}
	c, warm, err := startForBench(ctx, *opts, want("warm-start"))
	if err != nil {
		return err
	}
	defer func() { _ = c.Stop() }()
	if warm != nil {
		sections = append(sections, *warm)
	}

	measured := []struct {
		name string
		run  func(context.Context, *testbed.Cluster, int) (section, error)
	}{{"etcd-start", benchEtcdStart}, {"takeover", benchTakeover}, {"cluster-create", benchClusterCreate}, {"scale", benchScale}, {"upgrade", benchUpgrade},
		{"tls-switch", benchTLSSwitch}, {"backup-restore", benchBackupRestore}, {"pod-loss", benchPodLoss}, {"metrics-scrape", benchMetricsScrape},
		{"storage", benchStorage}, {"defrag", benchDefrag}, {"pitr", benchPITR}, {"fleet", benchFleet}, {"data-path", benchDataPath}, {"under-load", benchUnderLoad},
		{"hibernate", benchHibernate}, {"backup-formats", benchBackupFormats}, {"adopt", benchAdopt}}
	operatorRunning := false
	for _, m := range measured {
		if !want(m.name) {
			continue
		}
		// etcd-start needs no operator; takeover installs its own in the cluster (and removes it again).
		if m.name != "etcd-start" && m.name != "takeover" && !operatorRunning {
			if err := startOperatorProcess(ctx, c); err != nil {
				return err
			}
			operatorRunning = true
		}
		s, err := m.run(ctx, c, *runs)
		if err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		sections = append(sections, s)
	}
	if err := writeSections(*out, sections, c.KubernetesVersion()); err != nil {
		return err
	}
	fmt.Printf("results written to %s\n", *out)
	return nil
}

// startForBench starts the test bed the sections run on (the options given). With measure, it first times warm
// starts: three of three nodes (the e2e suite's kind of test bed), then three with the options given, the last
// left running, and returns them as the warm-start section.
func startForBench(ctx context.Context, opts testbed.Options, measure bool) (*testbed.Cluster, *section, error) {
	if !measure {
		c, err := testbed.Start(ctx, opts)
		return c, nil, err
	}
	threeNodes := opts
	threeNodes.Nodes, threeNodes.Zones, threeNodes.DedicatedNodes = 3, 0, 0
	var starts, startsThree []time.Duration
	var memory, memoryThree map[string]int64
	var c *testbed.Cluster
	for i := 0; i < 6; i++ {
		o, into := opts, &starts
		if i < 3 {
			o, into = threeNodes, &startsThree
		}
		begin := time.Now()
		var err error
		if c, err = testbed.Start(ctx, o); err != nil {
			return nil, nil, err
		}
		*into = append(*into, time.Since(begin))
		if i == 2 {
			memoryThree = c.ComponentMemory()
		}
		if i < 5 {
			if err := c.Stop(); err != nil {
				return nil, nil, err
			}
		}
	}
	memory = c.ComponentMemory()
	warm, err := render("warm-start", map[string]any{"Runs": len(starts),
		"Table": table([]row{{"warm start, 1 node", starts}, {"warm start, 3 nodes", startsThree}}), "Memory": memoryTable(memory, memoryThree)})
	if err != nil {
		return nil, nil, err
	}
	return c, &warm, nil
}

// memoryTable compares the test bed's process memory on one node and on three: the nodes' own processes
// (kubelets, containerds, provisioners, summed over the nodes), the control plane and the rest, and the total.
func memoryTable(one, three map[string]int64) string {
	group := func(name string) string {
		for _, per := range []string{"kubelet", "containerd", "provisioner"} {
			if name == per || strings.HasPrefix(name, per+"-") {
				return per + "s (one per node)"
			}
		}
		return "control plane and services (kube-apiserver and its etcd, controller-manager, scheduler, kube-proxy, cert-manager, S3, Prometheus)"
	}
	sum := func(m map[string]int64) (map[string]int64, int64) {
		out, total := map[string]int64{}, int64(0)
		for name, b := range m {
			out[group(name)] += b
			total += b
		}
		return out, total
	}
	g1, t1 := sum(one)
	g3, t3 := sum(three)
	var keys []string
	for k := range g3 {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	mib := func(b int64) string { return fmt.Sprintf("%d MiB", b>>20) }
	var b strings.Builder
	b.WriteString("| processes | 1 node | 3 nodes |\n|---|---|---|\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", k, mib(g1[k]), mib(g3[k]))
	}
	fmt.Fprintf(&b, "| total | %s | %s |\n", mib(t1), mib(t3))
	return b.String()
}

// operatorMetrics is the metrics endpoint of the operator startOperatorProcess started, and operatorFlags the
// flags it was given beside the test bed's (bench -operator-flags).
var (
	operatorMetrics string
	operatorFlags   []string
)

// startOperatorProcess builds Steward, installs the CRDs and runs Steward as a process of the test bed (its
// metrics on a loopback port).
func startOperatorProcess(ctx context.Context, c *testbed.Cluster) error {
	operator := filepath.Join(c.StateDir(), "bin", "steward")
	build := exec.CommandContext(ctx, "go", "build", "-o", operator, "./cmd/steward")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build operator: %w: %s", err, out)
	}
	port, err := testbed.LoopbackPort()
	if err != nil {
		return err
	}
	operatorMetrics = fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	// CRDs first: the operator exits at start when a kind it indexes (EtcdUser) is not served yet.
	if _, err := kubectlOn(ctx, c)("", "apply", "--server-side", "-f", "config/crd/bases"); err != nil {
		return fmt.Errorf("install CRDs: %w", err)
	}
	// The group's discovery document, which the operator's REST mapper reads, can lag a working `kubectl get`
	// (served from kubectl's cached mapping); a bench once waited 5 minutes on an operator that had exited.
	if err := testbed.Eventually(ctx, time.Minute, 200*time.Millisecond, func() error {
		out, err := kubectlOn(ctx, c)("", "get", "--raw", "/apis/etcd.steward.dev/v1alpha1")
		if err == nil && !strings.Contains(out, `"etcdusers"`) {
			err = errors.New("etcdusers not in the group's discovery yet")
		}
		return err
	}); err != nil {
		return fmt.Errorf("CRDs not served: %w", err)
	}
	// Plain HTTP, on the loopback interface only: the bench reads the metrics of the operator process it started.
	args := append([]string{fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", port), "--metrics-secure=false",
		"--health-probe-bind-address=0", "--etcd-image-repository=" + testbed.EtcdRepository, "--agent-image=" + testbed.AgentImage}, operatorFlags...)
	return c.Spawn("steward", []string{"KUBECONFIG=" + c.Kubeconfig}, operator, args...)
}

// benchEtcdStart times one etcd member as a Pod on the test bed next to the bare process.
func benchEtcdStart(ctx context.Context, c *testbed.Cluster, runs int) (section, error) {
	podTimes, err := benchPodStart(ctx, c, runs, false)
	if err != nil {
		return section{}, err
	}
	volumeTimes, err := benchPodStart(ctx, c, runs, true)
	if err != nil {
		return section{}, err
	}
	procTimes, err := benchEtcdProcess(ctx, c, runs)
	if err != nil {
		return section{}, err
	}
	return render("etcd-start", map[string]any{"Version": testbed.EtcdVersions[0], "Runs": runs, "Table": table([]row{{"etcd Pod to healthy", podTimes}, {"etcd Pod with a new PVC to healthy", volumeTimes},
		{"etcd process to healthy", procTimes}})})
}

// benchClusterCreate times apply -> Available of 1- and 3-member EtcdClusters with the operator running as a
// process, next to the same etcd binary forming a cluster of as many processes started by hand.
func benchClusterCreate(ctx context.Context, c *testbed.Cluster, runs int) (section, error) {
	kubectl := func(stdin string, args ...string) error {
		_, err := kubectlOn(ctx, c)(stdin, args...)
		return err
	}
	var rows []row
	for _, size := range []int{1, 3} {
		var times, bound []time.Duration
		for i := 0; i < runs; i++ {
			name := fmt.Sprintf("bench-%d-%d", size, i)
			manifest := fmt.Sprintf("apiVersion: etcd.steward.dev/v1alpha1\nkind: EtcdCluster\nmetadata: {name: %s, namespace: default}\n"+
				"spec: {replicas: %d, version: %q, storage: {size: 1Gi}}\n", name, size, testbed.EtcdVersions[0])
			begin := time.Now()
			if err := kubectl(manifest, "apply", "-f", "-"); err != nil {
				return section{}, err
			}
			if err := kubectl("", "wait", "--for=condition=Available", "etcdcluster/"+name, "--timeout=5m"); err != nil {
				return section{}, err
			}
			times = append(times, time.Since(begin))
			if err := kubectl("", "delete", "etcdcluster/"+name, "--wait=true"); err != nil {
				return section{}, err
			}
			d, err := etcdProcessesForm(ctx, c, size)
			if err != nil {
				return section{}, err
			}
			bound = append(bound, d)
		}
		rows = append(rows, row{fmt.Sprintf("%d member(s): apply to Available", size), times},
			row{fmt.Sprintf("%d etcd process(es) by hand: start to all healthy", size), bound})
	}
	return render("cluster-create", map[string]any{"Version": testbed.EtcdVersions[0], "Runs": runs, "Table": table(rows)})
}

// benchScale times scaling a 3-member EtcdCluster to 5 (and back) and replacing a member whose Pod and volume
// were deleted, next to a fourth etcd process joining a 3-process cluster by hand as a learner and being promoted.
// The operator is the one benchClusterCreate started.
func benchScale(ctx context.Context, c *testbed.Cluster, runs int) (section, error) {
	run := kubectlOn(ctx, c)
	kubectl := func(args ...string) (string, error) { return run("", args...) }
	settled := func(name string, replicas int) error {
		return testbed.Eventually(ctx, 5*time.Minute, 100*time.Millisecond, func() error {
			out, err := kubectl("get", "etcdcluster", name, "-o",
				`jsonpath={.status.readyReplicas}/{.status.conditions[?(@.type=="Progressing")].status}/{.status.members[*].name}/{.metadata.generation}/{.status.observedGeneration}`)
			if err != nil {
				return err
			}
			parts := strings.Split(out, "/")
			if len(parts) != 5 || parts[0] != fmt.Sprint(replicas) || parts[1] != "False" || len(strings.Fields(parts[2])) != replicas || parts[3] != parts[4] {
				return fmt.Errorf("not settled: %s", out)
			}
			return nil
		})
	}
	const name = "bench-scale"
	manifest := fmt.Sprintf("apiVersion: etcd.steward.dev/v1alpha1\nkind: EtcdCluster\nmetadata: {name: %s, namespace: default}\n"+
		"spec: {replicas: 3, version: %q, storage: {size: 1Gi}}\n", name, testbed.EtcdVersions[0])
	apply := exec.CommandContext(ctx, c.KubectlPath(), "--kubeconfig", c.Kubeconfig, "apply", "-f", "-")
	apply.Stdin = strings.NewReader(manifest)
	if out, err := apply.CombinedOutput(); err != nil {
		return section{}, fmt.Errorf("apply: %w: %s", err, out)
	}
	if err := settled(name, 3); err != nil {
		return section{}, err
	}
	var up, down, replace, afterRemoval, bound []time.Duration
	for i := 0; i < runs; i++ {
		for _, step := range []struct {
			replicas int
			into     *[]time.Duration
		}{{5, &up}, {3, &down}} {
			begin := time.Now()
			if _, err := kubectl("patch", "etcdcluster", name, "--type=merge", "-p", fmt.Sprintf(`{"spec":{"replicas":%d}}`, step.replicas)); err != nil {
				return section{}, err
			}
			if err := settled(name, step.replicas); err != nil {
				return section{}, err
			}
			*step.into = append(*step.into, time.Since(begin))
		}
		// Replace a follower whose data is gone: detection included (from the deletion).
		leader, err := kubectl("get", "etcdcluster", name, "-o", "jsonpath={.status.leader}")
		if err != nil {
			return section{}, err
		}
		members, err := kubectl("get", "etcdcluster", name, "-o", "jsonpath={.status.members[*].name}")
		if err != nil {
			return section{}, err
		}
		victim := ""
		for _, m := range strings.Fields(members) {
			if m != leader {
				victim = m
			}
		}
		begin := time.Now()
		if _, err := kubectl("delete", "pvc", victim+"-data", "--wait=false"); err != nil {
			return section{}, err
		}
		if _, err := kubectl("delete", "pod", victim, "--wait=false"); err != nil {
			return section{}, err
		}
		var removed time.Time
		if err := testbed.Eventually(ctx, 5*time.Minute, 100*time.Millisecond, func() error {
			out, err := kubectl("get", "etcdcluster", name, "-o", "jsonpath={.status.members[*].name}")
			if err != nil {
				return err
			}
			if strings.Contains(out, victim) {
				return fmt.Errorf("victim %s still listed", victim)
			}
			if removed.IsZero() {
				removed = time.Now()
			}
			return settled(name, 3)
		}); err != nil {
			return section{}, err
		}
		replace = append(replace, time.Since(begin))
		afterRemoval = append(afterRemoval, time.Since(removed))
		d, err := etcdProcessJoins(ctx, c)
		if err != nil {
			return section{}, err
		}
		bound = append(bound, d)
	}
	if _, err := kubectl("delete", "etcdcluster", name, "--wait=true"); err != nil {
		return section{}, err
	}
	return render("scale", map[string]any{"Runs": runs, "Table": table([]row{{"scale 3 -> 5", up}, {"scale 5 -> 3", down}, {"replace a member with lost data, detection included", replace},
		{"replace a member with lost data, after its removal", afterRemoval},
		{"etcd process joins by hand (learner, start, promote)", bound}})})
}

// kubectlOn returns a function that runs kubectl against the test bed with stdin and returns its trimmed output.
func kubectlOn(ctx context.Context, c *testbed.Cluster) func(stdin string, args ...string) (string, error) {
	return func(stdin string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, c.KubectlPath(), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("kubectl %v: %w: %s", args, err, out)
		}
		return strings.TrimSpace(string(out)), nil
	}
}

// benchUpgrade times rolling a 3-member EtcdCluster from one release to another (patch to settled: every member
// reports the new version, etcd's cluster version followed, nothing in progress), up 3.5 -> 3.6 and back down,
// next to the physical bound: three etcd processes on the host restarted one after another on the new binary,
// each until it answers /health.
func benchUpgrade(ctx context.Context, c *testbed.Cluster, runs int) (section, error) {
	kubectl := kubectlOn(ctx, c)
	const from, to = "3.5.35", "3.6.16"
	var name string
	settledAt := func(version, clusterVersion string) error {
		return testbed.Eventually(ctx, 10*time.Minute, 100*time.Millisecond, func() error {
			out, err := kubectl("", "get", "etcdcluster", name, "-o",
				`jsonpath={.status.currentVersion}/{.status.clusterVersion}/{.status.readyReplicas}/{.status.conditions[?(@.type=="Progressing")].status}/{.metadata.generation}/{.status.observedGeneration}/{.status.downgradeTarget}`)
			if err != nil {
				return err
			}
			if want := fmt.Sprintf("%s/%s/3/False/", version, clusterVersion); !strings.HasPrefix(out, want) || !strings.HasSuffix(out, "/") {
				return fmt.Errorf("not settled at %s: %s", version, out)
			}
			parts := strings.Split(out, "/")
			if parts[4] != parts[5] {
				return fmt.Errorf("not observed yet: %s", out)
			}
			return nil
		})
	}
	// rolledAt: every member runs version and its Pod is Ready, what the bound's restarts by hand amount to; etcd
	// raises (or lowers) the cluster version after that on its own timer.
	rolledAt := func(version string) error {
		return testbed.Eventually(ctx, 10*time.Minute, 100*time.Millisecond, func() error {
			out, err := kubectl("", "get", "etcdcluster", name, "-o", `jsonpath={.status.currentVersion}/{.status.readyReplicas}/{.metadata.generation}/{.status.observedGeneration}`)
			if err != nil {
				return err
			}
			if parts := strings.Split(out, "/"); len(parts) != 4 || parts[0] != version || parts[1] != "3" || parts[2] != parts[3] {
				return fmt.Errorf("not rolled to %s: %s", version, out)
			}
			return nil
		})
	}
	var up, upRolled, down, downRolled, bound []time.Duration
	for i := 0; i < runs; i++ {
		// A new cluster each run, so that every run takes the path a user's upgrade takes: the kubelet switches
		// the running Pods to an image they have not run, in place. The downgrade after it switches them back to
		// an image they ran minutes before, which Steward meets by re-creating the Pods (the kubelet's crash
		// back-off would hold an in-place switch back for 10 s), also every run. One cluster flipped back and
		// forth mixed the two paths in one row.
		name = fmt.Sprintf("bench-upgrade-%d", i)
		manifest := fmt.Sprintf("apiVersion: etcd.steward.dev/v1alpha1\nkind: EtcdCluster\nmetadata: {name: %s, namespace: default}\n"+
			"spec: {replicas: 3, version: %q, storage: {size: 1Gi}}\n", name, from)
		if _, err := kubectl(manifest, "apply", "-f", "-"); err != nil {
			return section{}, err
		}
		if err := settledAt(from, "3.5.0"); err != nil {
			return section{}, err
		}
		for _, step := range []struct {
			version, cluster string
			into, rolled     *[]time.Duration
		}{{to, "3.6.0", &up, &upRolled}, {from, "3.5.0", &down, &downRolled}} {
			begin := time.Now()
			if _, err := kubectl("", "patch", "etcdcluster", name, "--type=merge", "-p", fmt.Sprintf(`{"spec":{"version":%q}}`, step.version)); err != nil {
				return section{}, err
			}
			if err := rolledAt(step.version); err != nil {
				return section{}, err
			}
			*step.rolled = append(*step.rolled, time.Since(begin))
			if err := settledAt(step.version, step.cluster); err != nil {
				return section{}, err
			}
			*step.into = append(*step.into, time.Since(begin))
		}
		if _, err := kubectl("", "delete", "etcdcluster", name, "--wait=true"); err != nil {
			return section{}, err
		}
		d, err := etcdProcessesRestart(ctx, c, from, to)
		if err != nil {
			return section{}, err
		}
		bound = append(bound, d)
	}
	return render("upgrade", map[string]any{"From": from, "To": to, "Runs": runs, "Table": table([]row{{"upgrade " + from + " -> " + to + ": every member on it and ready", upRolled},
		{"upgrade " + from + " -> " + to + ": settled", up},
		{"downgrade " + to + " -> " + from + ": every member on it and ready", downRolled},
		{"downgrade " + to + " -> " + from + ": settled", down},
		{"3 etcd processes restarted on " + to + " by hand", bound}})})
}

// benchTLSSwitch times switching a 3-member cluster from plaintext to TLS and back.
func benchTLSSwitch(ctx context.Context, c *testbed.Cluster, runs int) (section, error) {
	kubectl := kubectlOn(ctx, c)
	const name = "bench-tls"
	settledAs := func(mode string) error {
		return testbed.Eventually(ctx, 10*time.Minute, 100*time.Millisecond, func() error {
			out, err := kubectl("", "get", "etcdcluster", name, "-o",
				`jsonpath={.status.members[*].tls}/{.status.readyReplicas}/{.status.conditions[?(@.type=="Progressing")].status}/{.metadata.generation}/{.status.observedGeneration}`)
			if err != nil {
				return err
			}
			parts := strings.Split(out, "/")
			if len(parts) != 5 || parts[0] != strings.TrimSpace(strings.Repeat(mode+" ", 3)) || parts[1] != "3" || parts[2] != "False" || parts[3] != parts[4] {
				return fmt.Errorf("not settled as %s: %s", mode, out)
			}
			return nil
		})
	}
	manifest := fmt.Sprintf("apiVersion: etcd.steward.dev/v1alpha1\nkind: EtcdCluster\nmetadata: {name: %s, namespace: default}\n"+
		"spec: {replicas: 3, version: %q, storage: {size: 1Gi}, tls: {provider: None}}\n", name, testbed.EtcdVersions[0])
	if _, err := kubectl(manifest, "apply", "-f", "-"); err != nil {
		return section{}, err
	}
	if err := settledAs("Plaintext"); err != nil {
		return section{}, err
	}
	var on, off, bound []time.Duration
	for i := 0; i < runs; i++ {
		for _, step := range []struct {
			provider, mode string
			into           *[]time.Duration
		}{{"Steward", "TLS", &on}, {"None", "Plaintext", &off}} {
			begin := time.Now()
			if _, err := kubectl("", "patch", "etcdcluster", name, "--type=merge", "-p", fmt.Sprintf(`{"spec":{"tls":{"provider":%q}}}`, step.provider)); err != nil {
				return section{}, err
			}
			if err := settledAs(step.mode); err != nil {
				return section{}, err
			}
			*step.into = append(*step.into, time.Since(begin))
		}
		var total time.Duration
		for j := 0; j < 2; j++ {
			d, err := etcdProcessesRestart(ctx, c, testbed.EtcdVersions[0], testbed.EtcdVersions[0])
			if err != nil {
				return section{}, err
			}
			total += d
		}
		bound = append(bound, total)
	}
	if _, err := kubectl("", "delete", "etcdcluster", name, "--wait=true"); err != nil {
		return section{}, err
	}
	return render("tls-switch", map[string]any{"Version": testbed.EtcdVersions[0], "Runs": runs, "Table": table([]row{{"plaintext -> TLS", on}, {"TLS -> plaintext", off},
		{"3 etcd processes restarted twice by hand", bound}})})
}

// benchPodLoss times a 3-member cluster losing the Pods of 2 members at once (volumes intact): from the deletion
// until Available again and until all 3 members are ready, next to 2 of 3 etcd processes stopped at once and
// started again on their data dirs by hand.
func benchPodLoss(ctx context.Context, c *testbed.Cluster, runs int) (section, error) {
	kubectl := kubectlOn(ctx, c)
	const name = "bench-podloss"
	state := func() (available, ready string, members []string, err error) {
		out, err := kubectl("", "get", "etcdcluster", name, "-o",
			`jsonpath={.status.conditions[?(@.type=="Available")].status}/{.status.readyReplicas}/{.status.members[*].name}`)
		if err != nil {
			return "", "", nil, err
		}
		parts := strings.SplitN(out, "/", 3)
		if len(parts) != 3 {
			return "", "", nil, fmt.Errorf("status %q", out)
		}
		return parts[0], parts[1], strings.Fields(parts[2]), nil
	}
	settled := func() error {
		return testbed.Eventually(ctx, 5*time.Minute, 100*time.Millisecond, func() error {
			available, ready, _, err := state()
			if err != nil {
				return err
			}
			if available != "True" || ready != "3" {
				return fmt.Errorf("not settled: Available=%s, %s ready", available, ready)
			}
			return nil
		})
	}
	manifest := fmt.Sprintf("apiVersion: etcd.steward.dev/v1alpha1\nkind: EtcdCluster\nmetadata: {name: %s, namespace: default}\n"+
		"spec: {replicas: 3, version: %q, storage: {size: 1Gi}}\n", name, testbed.EtcdVersions[0])
	if _, err := kubectl(manifest, "apply", "-f", "-"); err != nil {
		return section{}, err
	}
	if err := settled(); err != nil {
		return section{}, err
	}
	var back, allReady, bound []time.Duration
	for i := 0; i < runs; i++ {
		_, _, members, err := state()
		if err != nil {
			return section{}, err
		}
		if len(members) != 3 {
			return section{}, fmt.Errorf("members %v", members)
		}
		begin := time.Now()
		if _, err := kubectl("", append([]string{"delete", "pod", "--wait=false"}, members[:2]...)...); err != nil {
			return section{}, err
		}
		// Available turns False once the Pods' deletion is seen; wait for that before waiting for it to come back.
		if err := testbed.Eventually(ctx, time.Minute, 50*time.Millisecond, func() error {
			available, _, _, err := state()
			if err != nil {
				return err
			}
			if available == "True" {
				return errors.New("still Available")
			}
			return nil
		}); err != nil {
			return section{}, err
		}
		if err := testbed.Eventually(ctx, 5*time.Minute, 100*time.Millisecond, func() error {
			available, _, _, err := state()
			if err != nil {
				return err
			}
			if available != "True" {
				return errors.New("not Available yet")
			}
			return nil
		}); err != nil {
			return section{}, err
		}
		back = append(back, time.Since(begin))
		if err := settled(); err != nil {
			return section{}, err
		}
		allReady = append(allReady, time.Since(begin))
		d, err := etcdProcessesRestartGroups(ctx, c, testbed.EtcdVersions[0], testbed.EtcdVersions[0], [][]int{{0, 1}})
		if err != nil {
			return section{}, err
		}
		bound = append(bound, d)
	}
	if _, err := kubectl("", "delete", "etcdcluster", name, "--wait=true"); err != nil {
		return section{}, err
	}
	return render("pod-loss", map[string]any{"Version": testbed.EtcdVersions[0], "Runs": runs, "Table": table([]row{{"2 of 3 Pods deleted: until Available", back}, {"until all 3 ready", allReady},
		{"2 of 3 etcd processes restarted by hand", bound}})})
}

// loopbackMemberArgs are the flags of etcd process m<i> of a cluster of processes on the host: its data dir
// under dir, its client and peer URL, and the cluster's initial member list, initial state and token.
func loopbackMemberArgs(i int, dir, clientURL, peerURL, initial, state, token string) []string {
	return []string{fmt.Sprintf("--name=m%d", i), "--data-dir=" + filepath.Join(dir, fmt.Sprint(i)),
		"--listen-client-urls=" + clientURL, "--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=" + initial, "--initial-cluster-state=" + state, "--initial-cluster-token=" + token}
}

// etcdProcessesRestart forms a 3-process cluster on loopback at version from, then times stopping each process
// in turn and starting it on version to's binary until it answers /health.
func etcdProcessesRestart(ctx context.Context, c *testbed.Cluster, from, to string) (time.Duration, error) {
	return etcdProcessesRestartGroups(ctx, c, from, to, [][]int{{0}, {1}, {2}})
}

// etcdProcessesRestartGroups forms a 3-process cluster on loopback at version from, then times, for each group in
// turn, stopping its processes at once and starting them on version to's binary on their data dirs until every
// one answers /health (which needs a leader, so quorum back).
func etcdProcessesRestartGroups(ctx context.Context, c *testbed.Cluster, from, to string, groups [][]int) (time.Duration, error) {
	dir, err := os.MkdirTemp("", "steward-bench-restart-")
	if err != nil {
		return 0, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	peer := func(i int) string { return fmt.Sprintf("http://127.0.0.1:%d", 35380+i) }
	clientURL := func(i int) string { return fmt.Sprintf("http://127.0.0.1:%d", 35370+i) }
	initial := fmt.Sprintf("m0=%s,m1=%s,m2=%s", peer(0), peer(1), peer(2))
	cmds := make([]*exec.Cmd, 3)
	defer func() {
		for _, cmd := range cmds {
			if cmd != nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
		}
	}()
	start := func(i int, version string) error {
		cmd := exec.CommandContext(ctx, filepath.Join(c.EtcdBinDir(version), "etcd"),
			loopbackMemberArgs(i, dir, clientURL(i), peer(i), initial, "new", "bench-restart")...)
		if err := cmd.Start(); err != nil {
			return err
		}
		cmds[i] = cmd
		return nil
	}
	healthy := func(i int) error {
		return testbed.Eventually(ctx, time.Minute, 20*time.Millisecond, func() error { return testbed.HTTPHealthy(clientURL(i) + "/health")(ctx) })
	}
	for i := 0; i < 3; i++ {
		if err := start(i, from); err != nil {
			return 0, err
		}
	}
	for i := 0; i < 3; i++ {
		if err := healthy(i); err != nil {
			return 0, err
		}
	}
	begin := time.Now()
	for _, group := range groups {
		for _, i := range group {
			_ = cmds[i].Process.Signal(os.Interrupt)
			_ = cmds[i].Wait()
		}
		for _, i := range group {
			if err := start(i, to); err != nil {
				return 0, err
			}
		}
		for _, i := range group {
			if err := healthy(i); err != nil {
				return 0, fmt.Errorf("process %d on %s: %w", i, to, err)
			}
		}
	}
	return time.Since(begin), nil
}

// etcdProcessJoins forms a 3-process cluster on loopback and times adding a fourth as a learner, starting it
// and promoting it.
func etcdProcessJoins(ctx context.Context, c *testbed.Cluster) (time.Duration, error) {
	dir, err := os.MkdirTemp("", "steward-bench-join-")
	if err != nil {
		return 0, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	bin := filepath.Join(c.EtcdBinDir(testbed.EtcdVersions[0]), "etcd")
	peer := func(i int) string { return fmt.Sprintf("http://127.0.0.1:%d", 34380+i) }
	clientURL := func(i int) string { return fmt.Sprintf("http://127.0.0.1:%d", 34370+i) }
	var cmds []*exec.Cmd
	defer func() {
		for _, cmd := range cmds {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	start := func(i int, initial, state string) error {
		cmd := exec.CommandContext(ctx, bin, loopbackMemberArgs(i, dir, clientURL(i), peer(i), initial, state, "bench-join")...)
		if err := cmd.Start(); err != nil {
			return err
		}
		cmds = append(cmds, cmd)
		return nil
	}
	initial := fmt.Sprintf("m0=%s,m1=%s,m2=%s", peer(0), peer(1), peer(2))
	for i := 0; i < 3; i++ {
		if err := start(i, initial, "new"); err != nil {
			return 0, err
		}
	}
	for i := 0; i < 3; i++ {
		if err := testbed.Eventually(ctx, time.Minute, 50*time.Millisecond, func() error { return testbed.HTTPHealthy(clientURL(i) + "/health")(ctx) }); err != nil {
			return 0, err
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{clientURL(0), clientURL(1), clientURL(2)}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return 0, err
	}
	defer func() { _ = cli.Close() }()
	// etcd refuses membership changes ("unhealthy cluster") until its members have been connected for a few
	// seconds; the clock starts at the attempt that is accepted.
	var begin time.Time
	var resp *clientv3.MemberAddResponse
	if err := testbed.Eventually(ctx, time.Minute, 100*time.Millisecond, func() error {
		begin = time.Now()
		var err error
		resp, err = cli.MemberAddAsLearner(ctx, []string{peer(3)})
		return err
	}); err != nil {
		return 0, fmt.Errorf("add learner: %w", err)
	}
	if err := start(3, initial+",m3="+peer(3), "existing"); err != nil {
		return 0, err
	}
	if err := testbed.Eventually(ctx, time.Minute, 50*time.Millisecond, func() error {
		_, err := cli.MemberPromote(ctx, resp.Member.ID)
		return err
	}); err != nil {
		return 0, fmt.Errorf("promote: %w", err)
	}
	return time.Since(begin), nil
}

// etcdProcessesForm starts n etcd processes forming one cluster on loopback and times until all are healthy.
func etcdProcessesForm(ctx context.Context, c *testbed.Cluster, n int) (time.Duration, error) {
	dir, err := os.MkdirTemp("", "steward-bench-form-")
	if err != nil {
		return 0, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	var initial []string
	for i := 0; i < n; i++ {
		initial = append(initial, fmt.Sprintf("m%d=http://127.0.0.1:%d", i, 33380+i))
	}
	var cmds []*exec.Cmd
	defer func() {
		for _, cmd := range cmds {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	begin := time.Now()
	for i := 0; i < n; i++ {
		cmd := exec.CommandContext(ctx, filepath.Join(c.EtcdBinDir(testbed.EtcdVersions[0]), "etcd"),
			loopbackMemberArgs(i, dir, fmt.Sprintf("http://127.0.0.1:%d", 33370+i), fmt.Sprintf("http://127.0.0.1:%d", 33380+i),
				strings.Join(initial, ","), "new", "bench")...)
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		cmds = append(cmds, cmd)
	}
	for i := 0; i < n; i++ {
		url := fmt.Sprintf("http://127.0.0.1:%d/health", 33370+i)
		if err := testbed.Eventually(ctx, time.Minute, 50*time.Millisecond, func() error { return testbed.HTTPHealthy(url)(ctx) }); err != nil {
			return 0, fmt.Errorf("etcd process %d: %w", i, err)
		}
	}
	return time.Since(begin), nil
}

func benchColdStart(ctx context.Context, opts testbed.Options) (section, error) {
	tmp, err := os.MkdirTemp("", "steward-cold-")
	if err != nil {
		return section{}, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	for k, v := range map[string]string{"GOMODCACHE": filepath.Join(tmp, "mod"), "GOCACHE": filepath.Join(tmp, "build")} {
		old, had := os.LookupEnv(k)
		_ = os.Setenv(k, v)
		if had {
			defer func() { _ = os.Setenv(k, old) }()
		} else {
			defer func() { _ = os.Unsetenv(k) }()
		}
	}
	opts.CacheDir = filepath.Join(tmp, "steward")
	begin := time.Now()
	c, err := testbed.Start(ctx, opts)
	if err != nil {
		return section{}, err
	}
	took := time.Since(begin)
	// The module cache is read-only on disk; make it removable.
	_ = exec.Command("chmod", "-R", "u+w", tmp).Run()
	if err := c.Stop(); err != nil {
		return section{}, err
	}
	return render("cold-start", map[string]any{"Kubernetes": c.KubernetesVersion(), "EtcdVersions": strings.Join(testbed.EtcdVersions, " and "), "CoreDNS": testbed.CoreDNSVersion, "Table": table([]row{{"cold start", []time.Duration{took}}})})
}

// benchPodStart times a Pod of the local etcd image from its creation until etcd answers /health on the Pod IP;
// withVolume, etcd's data dir is on a PVC of the default StorageClass created just before the Pod, as a member's is
// (the scheduler binds a new claim of a WaitForFirstConsumer class while it places the Pod).
func benchPodStart(ctx context.Context, c *testbed.Cluster, runs int, withVolume bool) ([]time.Duration, error) {
	cs, err := kubernetes.NewForConfig(c.RESTConfig)
	if err != nil {
		return nil, err
	}
	var times []time.Duration
	for i := 0; i < runs; i++ {
		name := fmt.Sprintf("bench-etcd-%d", i)
		dataDir := "/tmp/data"
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "etcd", Image: testbed.EtcdImage(testbed.EtcdVersions[0]), ImagePullPolicy: corev1.PullNever,
			}}},
		}
		var claim *corev1.PersistentVolumeClaim
		if withVolume {
			name += "-pvc"
			pod.Name, dataDir = name, "/var/lib/etcd/data"
			claim = &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
			}
			pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}}}
			pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/etcd"}}
		}
		pod.Spec.Containers[0].Command = []string{"/usr/local/bin/etcd", "--data-dir=" + dataDir, "--listen-client-urls=http://0.0.0.0:2379",
			"--advertise-client-urls=http://127.0.0.1:2379"}
		begin := time.Now()
		if claim != nil {
			if _, err := cs.CoreV1().PersistentVolumeClaims("default").Create(ctx, claim, metav1.CreateOptions{}); err != nil {
				return nil, err
			}
		}
		if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
		err := testbed.Eventually(ctx, 2*time.Minute, 50*time.Millisecond, func() error {
			p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p.Status.PodIP == "" {
				return fmt.Errorf("no pod IP yet")
			}
			return testbed.HTTPHealthy("http://" + p.Status.PodIP + ":2379/health")(ctx)
		})
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w", name, err)
		}
		times = append(times, time.Since(begin))
		_ = cs.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		if claim != nil {
			_ = cs.CoreV1().PersistentVolumeClaims("default").Delete(ctx, name, metav1.DeleteOptions{})
		}
	}
	return times, nil
}

func benchEtcdProcess(ctx context.Context, c *testbed.Cluster, runs int) ([]time.Duration, error) {
	var times []time.Duration
	for i := 0; i < runs; i++ {
		dir, err := os.MkdirTemp("", "steward-bench-etcd-")
		if err != nil {
			return nil, err
		}
		begin := time.Now()
		cmd := exec.CommandContext(ctx, filepath.Join(c.EtcdBinDir(testbed.EtcdVersions[0]), "etcd"), "--data-dir="+dir,
			"--listen-client-urls=http://127.0.0.1:32379", "--advertise-client-urls=http://127.0.0.1:32379",
			"--listen-peer-urls=http://127.0.0.1:32380", "--initial-advertise-peer-urls=http://127.0.0.1:32380",
			"--initial-cluster=default=http://127.0.0.1:32380")
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		err = testbed.Eventually(ctx, time.Minute, 50*time.Millisecond, func() error { return testbed.HTTPHealthy("http://127.0.0.1:32379/health")(ctx) })
		took := time.Since(begin)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = os.RemoveAll(dir)
		if err != nil {
			return nil, fmt.Errorf("etcd process: %w", err)
		}
		times = append(times, took)
	}
	return times, nil
}

type row struct {
	name  string
	times []time.Duration
}

func table(rows []row) string {
	var b strings.Builder
	b.WriteString("| measurement | runs | median | min | max |\n|---|---|---|---|---|\n")
	for _, r := range rows {
		if len(r.times) == 0 {
			continue
		}
		t := sorted(r.times)
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s |\n", r.name, len(t), round(t[len(t)/2]), round(t[0]), round(t[len(t)-1]))
	}
	return b.String()
}

// sorted is a sorted copy of times.
func sorted(times []time.Duration) []time.Duration {
	t := append([]time.Duration(nil), times...)
	sort.Slice(t, func(i, j int) bool { return t[i] < t[j] })
	return t
}

func round(d time.Duration) string {
	if d > time.Minute {
		return d.Round(time.Second).String()
	}
	return d.Round(10 * time.Millisecond).String()
}

// writeSections replaces each section's previous result in path (or appends it) and stamps the machine and the
// Kubernetes release of the test bed the sections ran on.
func writeSections(path string, sections []section, kubernetes string) error {
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	doc := string(data)
	if doc == "" {
		if doc, err = renderText("header", nil); err != nil {
			return err
		}
	}
	host, _ := os.Hostname()
	stamp, err := renderText("stamp", map[string]any{"Date": time.Now().UTC().Format("2006-01-02"), "Host": host, "CPUs": runtime.NumCPU(),
		"Kernel": kernel(), "Kubernetes": kubernetes})
	if err != nil {
		return err
	}
	for _, s := range sections {
		start, end := "<!-- bench:"+s.name+" -->", "<!-- /bench:"+s.name+" -->"
		block := start + "\n" + s.body + stamp + end
		re := regexp.MustCompile(`(?s)` + regexp.QuoteMeta(start) + `.*?` + regexp.QuoteMeta(end))
		if re.MatchString(doc) {
			doc = re.ReplaceAllLiteralString(doc, block)
		} else {
			doc = strings.TrimRight(doc, "\n") + "\n\n" + block + "\n"
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(doc), 0o644)
}

func kernel() string {
	out, err := exec.Command("uname", "-r").Output()
	if err != nil {
		return "unknown kernel"
	}
	return "Linux " + strings.TrimSpace(string(out))
}
