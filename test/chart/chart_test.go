package chart

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the chart's output")

// The values files the golden files are rendered from; "" is the chart's defaults.
var valueSets = map[string]string{
	"default":    "",
	"namespaced": "testdata/namespaced.values.yaml",
	"everything": "testdata/everything.values.yaml",
	"monitoring": "testdata/monitoring.values.yaml",
}

// valueSetAPIs are the API versions the cluster serves besides Kubernetes' own, per value set (as
// `helm template --api-versions`); the others render for a cluster without the Prometheus Operator's CRDs.
var valueSetAPIs = map[string][]string{
	"monitoring": {monitoringAPI},
}

// TestLint runs `helm lint` (strict: no warnings either) with each values file.
func TestLint(t *testing.T) {
	for name, file := range valueSets {
		t.Run(name, func(t *testing.T) {
			linter := lint.AllWithKubeVersion(chartDir, readValues(t, file), releaseNamespace, &minKube)
			for _, m := range linter.Messages {
				// Info is only advice (an icon is recommended); warnings and errors fail, as `helm lint --strict`.
				if m.Severity > support.InfoSev {
					t.Errorf("helm lint: %s", m)
				}
			}
		})
	}
}

// TestGolden compares the rendered chart with testdata/<values set>.golden; `go test ./... -update` rewrites them,
// and the diff in review shows what a chart change does to users' manifests.
func TestGolden(t *testing.T) {
	for name, file := range valueSets {
		t.Run(name, func(t *testing.T) {
			out, err := renderWith(t, valueSetAPIs[name], readValues(t, file))
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			got := out.manifest()
			golden := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatalf("write %s: %v", golden, err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read %s (run go test ./... -update to create it): %v", golden, err)
			}
			if got != string(want) {
				t.Errorf("rendered chart differs from %s (go test ./... -update rewrites it; review the diff):\n%s",
					golden, lineDiff(string(want), got))
			}
		})
	}
}

// TestSchemaRefusesBadValues: each bad value stops the install with a message that names the field, before any
// template runs.
func TestSchemaRefusesBadValues(t *testing.T) {
	cases := map[string]struct {
		values string
		want   []string // in the message, in this order
	}{
		"unknown top-level key":    {values: "replicas: 3", want: []string{"additional properties 'replicas' not allowed"}},
		"unknown image key":        {values: "image: {tags: v1}", want: []string{"/image", "'tags'"}},
		"replicaCount a string":    {values: `replicaCount: "2"`, want: []string{"/replicaCount", "want integer"}},
		"replicaCount zero":        {values: "replicaCount: 0", want: []string{"/replicaCount", "minimum"}},
		"replicaCount fractional":  {values: "replicaCount: 1.5", want: []string{"/replicaCount", "want integer"}},
		"pullPolicy unknown":       {values: "image: {pullPolicy: Sometimes}", want: []string{"/image/pullPolicy", "IfNotPresent"}},
		"empty repository":         {values: `image: {repository: ""}`, want: []string{"/image/repository"}},
		"repository with a space":  {values: `image: {repository: "ghcr.io/steward dev"}`, want: []string{"/image/repository"}},
		"tag with a colon":         {values: `image: {tag: "v1:2"}`, want: []string{"/image/tag"}},
		"watchNamespaces a string": {values: "watchNamespaces: team-a", want: []string{"/watchNamespaces", "want array"}},
		"namespace not a label":    {values: "watchNamespaces: [Team_A]", want: []string{"/watchNamespaces/0"}},
		"namespace twice":          {values: "watchNamespaces: [a, a]", want: []string{"/watchNamespaces", "are equal"}},
		"metrics port too high":    {values: "metrics: {port: 70000}", want: []string{"/metrics/port", "maximum"}},
		"metrics enabled a string": {values: `metrics: {enabled: "yes"}`, want: []string{"/metrics/enabled", "want boolean"}},
		"extraArgs not a flag":     {values: "extraArgs: [debug]", want: []string{"/extraArgs/0"}},
		"resources misspelt":       {values: "resources: {limit: {memory: 1Gi}}", want: []string{"/resources", "'limit'"}},
		"unknown serviceAccount key": {
			values: "serviceAccount: {annotation: {a: b}}", want: []string{"/serviceAccount", "'annotation'"},
		},
		"nodeSelector value a number": {values: "nodeSelector: {zone: 1}", want: []string{"/nodeSelector/zone", "want string"}},
		"clusterDomain with a slash":  {values: "clusterDomain: cluster.local/", want: []string{"/clusterDomain"}},
		"lease namespace not a label": {values: "leaderElection: {namespace: Kube_System}", want: []string{"/leaderElection/namespace"}},
		"lease duration without unit": {values: "leaderElection: {leaseDuration: 15}", want: []string{"/leaderElection/leaseDuration", "want string"}},
		"retry period not a duration": {values: "leaderElection: {retryPeriod: 2 seconds}", want: []string{"/leaderElection/retryPeriod"}},
		"monitoring key misspelt":     {values: "monitoring: {podMonitors: {enabled: true}}", want: []string{"/monitoring", "'podMonitors'"}},
		"monitor enabled a string":    {values: `monitoring: {prometheusRule: {enabled: "yes"}}`, want: []string{"/monitoring/prometheusRule/enabled", "want boolean"}},
		"monitor label a number":      {values: "monitoring: {serviceMonitor: {additionalLabels: {release: 1}}}", want: []string{"/monitoring/serviceMonitor/additionalLabels/release", "want string"}},
		"SLO target of 1":             {values: "monitoring: {slo: {availabilityTarget: 1}}", want: []string{"/monitoring/slo/availabilityTarget"}},
		"SLO target a percentage":     {values: "monitoring: {slo: {latencyTarget: 99}}", want: []string{"/monitoring/slo/latencyTarget"}},
		"pprof port a string":         {values: `pprof: {port: "6060"}`, want: []string{"/pprof/port"}},
		"dashboard namespace invalid": {values: "monitoring: {grafanaDashboard: {namespace: Monitoring}}", want: []string{"/monitoring/grafanaDashboard/namespace"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := render(t, parseValues(t, tc.values))
			if err == nil {
				t.Fatalf("values %q were accepted", tc.values)
			}
			msg := err.Error()
			if !strings.Contains(msg, "values don't meet the specifications of the schema") {
				t.Fatalf("values %q refused, but not by the schema: %v", tc.values, err)
			}
			rest := msg
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("values %q: message does not name %q (in order %q):\n%s", tc.values, w, tc.want, msg)
				}
				rest = rest[i+len(w):]
			}
		})
	}
}

// TestGoodValuesAreAccepted guards the schema from the other side: the values users write, including the
// forms the schema's patterns must not refuse.
func TestGoodValuesAreAccepted(t *testing.T) {
	for name, values := range map[string]string{
		"registry with a port":     "image: {repository: registry.example:5000/steward, tag: v0.1.0-rc.1}",
		"digest-like tag":          "image: {tag: sha256_abc}",
		"one replica":              "replicaCount: 1",
		"global from a parent":     "global: {imageRegistry: x}",
		"lease namespace":          "leaderElection: {namespace: kube-system}",
		"lease timings":            "leaderElection: {leaseDuration: 1m30s, renewDeadline: 45.5s, retryPeriod: 500ms}",
		"empty etcd repository":    `etcdImageRepository: ""`,
		"resource claims":          "resources: {claims: [{name: gpu}]}",
		"custom spread":            "topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]",
		"agent image with digest":  "agentImage: registry.example/steward@sha256:0123",
		"multi-label cluster name": "clusterDomain: k8s.example.internal",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := render(t, parseValues(t, values)); err != nil {
				t.Errorf("values %q refused: %v", values, err)
			}
		})
	}
}

// generatedRules are config/rbac/role.yaml's rules: controller-gen's output of the +kubebuilder:rbac markers.
func generatedRules(t *testing.T) []rbacv1.PolicyRule {
	t.Helper()
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(readRepoFile(t, "config/rbac/role.yaml"), &role); err != nil {
		t.Fatalf("parse config/rbac/role.yaml: %v", err)
	}
	if len(role.Rules) == 0 {
		t.Fatal("config/rbac/role.yaml has no rules")
	}
	return role.Rules
}

// TestRBACRulesAreGenerated: the chart grants exactly what the markers declare, cluster-wide by default and in
// each watched namespace when namespaced, bound to the ServiceAccount the Deployment runs as.
func TestRBACRulesAreGenerated(t *testing.T) {
	want := generatedRules(t)
	t.Run("cluster-wide", func(t *testing.T) {
		out := mustRender(t, nil)
		role := decode[rbacv1.ClusterRole](t, out.one(t, "ClusterRole", "steward-manager"))
		if !reflect.DeepEqual(role.Rules, want) {
			t.Errorf("ClusterRole rules differ from config/rbac/role.yaml:\ngot  %v\nwant %v", role.Rules, want)
		}
		if n := len(out.find("Role")); n != 0 {
			t.Errorf("cluster-wide install renders %d Roles, want none", n)
		}
		binding := decode[rbacv1.ClusterRoleBinding](t, out.one(t, "ClusterRoleBinding", "steward-manager"))
		checkBinding(t, binding.RoleRef, binding.Subjects, "ClusterRole", "steward-manager", "steward")
	})
	t.Run("namespaced", func(t *testing.T) {
		out := mustRender(t, parseValues(t, "watchNamespaces: [team-a, team-b]"))
		// Only the metrics endpoint's (TestMetricsRBAC): TokenReviews and SubjectAccessReviews are cluster-scoped.
		for _, kind := range []string{"ClusterRole", "ClusterRoleBinding"} {
			for _, o := range out.find(kind) {
				if !strings.HasPrefix(o.Name, "steward-"+releaseNamespace+"-metrics-") {
					t.Errorf("namespaced install renders %s %s, want only the metrics endpoint's", kind, o.Name)
				}
			}
		}
		for _, ns := range []string{"team-a", "team-b"} {
			var role rbacv1.Role
			var binding rbacv1.RoleBinding
			for _, o := range out.find("Role") {
				if o.NS == ns {
					role = decode[rbacv1.Role](t, o)
				}
			}
			for _, o := range out.find("RoleBinding") {
				if o.NS == ns {
					binding = decode[rbacv1.RoleBinding](t, o)
				}
			}
			if !reflect.DeepEqual(role.Rules, want) {
				t.Errorf("Role in %s: rules differ from config/rbac/role.yaml:\ngot  %v\nwant %v", ns, role.Rules, want)
			}
			checkBinding(t, binding.RoleRef, binding.Subjects, "Role", role.Name, "steward")
		}
	})
}

// TestLeaderElectionRulesAreGenerated: the Role a namespaced install adds for the Lease grants nothing the
// markers do not (cmd/steward/main.go declares leader election's needs), and enough for leader election.
func TestLeaderElectionRulesAreGenerated(t *testing.T) {
	generated := generatedRules(t)
	out := mustRender(t, parseValues(t, "watchNamespaces: [team-a]"))
	var lease []object
	for _, o := range out.find("Role") {
		if o.Name == "steward-leader-election" {
			lease = append(lease, o)
		}
	}
	if len(lease) != 1 || lease[0].NS != releaseNamespace {
		t.Fatalf("want one leader election Role in %s, got %+v", releaseNamespace, lease)
	}
	role := decode[rbacv1.Role](t, lease[0])
	for _, r := range role.Rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					if !grants(generated, g, res, v) {
						t.Errorf("leader election Role grants %s %s %q, which config/rbac/role.yaml does not", v, res, g)
					}
				}
			}
		}
	}
	// client-go's LeaseLock gets, creates and updates the Lease; the elector records Events about it.
	for _, need := range []struct{ group, resource, verb string }{
		{"coordination.k8s.io", "leases", "get"}, {"coordination.k8s.io", "leases", "create"},
		{"coordination.k8s.io", "leases", "update"}, {"", "events", "create"},
	} {
		if !grants(role.Rules, need.group, need.resource, need.verb) {
			t.Errorf("leader election Role lacks %s %s %q", need.verb, need.resource, need.group)
		}
	}
	binding := decode[rbacv1.RoleBinding](t, out.one(t, "RoleBinding", "steward-leader-election"))
	checkBinding(t, binding.RoleRef, binding.Subjects, "Role", "steward-leader-election", "steward")

	// When the Lease's namespace is a watched one, its Role there already grants leader election's rules.
	out = mustRender(t, parseValues(t, "watchNamespaces: [team-a, steward-system]"))
	for _, o := range out.Objects {
		if o.Name == "steward-leader-election" {
			t.Errorf("release namespace is watched, yet %s %s/%s is rendered", o.Kind, o.NS, o.Name)
		}
	}
	// A Lease elsewhere gets its Role there, and the operator is told where.
	out = mustRender(t, parseValues(t, "{watchNamespaces: [team-a], leaderElection: {namespace: steward-leases}}"))
	if o := out.one(t, "Role", "steward-leader-election"); o.NS != "steward-leases" {
		t.Errorf("leader election Role in %q, want steward-leases", o.NS)
	}
	if args := managerArgs(t, out); !slices.Contains(args, "--leader-election-namespace=steward-leases") {
		t.Errorf("args %q lack --leader-election-namespace=steward-leases", args)
	}
}

// grants tells whether rules allow a verb on a resource of an API group (no wildcards: controller-gen writes none).
func grants(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	for _, r := range rules {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
			return true
		}
	}
	return false
}

func checkBinding(t *testing.T, ref rbacv1.RoleRef, subjects []rbacv1.Subject, kind, name, serviceAccount string) {
	t.Helper()
	if ref.Kind != kind || ref.Name != name || ref.APIGroup != rbacv1.GroupName {
		t.Errorf("binding refers to %+v, want %s %s", ref, kind, name)
	}
	want := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: serviceAccount, Namespace: releaseNamespace}}
	if !reflect.DeepEqual(subjects, want) {
		t.Errorf("binding subjects %+v, want %+v", subjects, want)
	}
}

// versionConstants evaluates internal/version's constants from its source, the way the compiler does, so this
// module need not import the operator's (and its dependencies).
func versionConstants(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "version.go", readRepoFile(t, "internal/version/version.go"), 0)
	if err != nil {
		t.Fatalf("parse internal/version/version.go: %v", err)
	}
	// Without an importer, the file's imports (used by its functions) stay unresolved; the constants do not
	// depend on them, and a constant that did would be missing below.
	var typeErrors []error
	conf := types.Config{Error: func(err error) { typeErrors = append(typeErrors, err) }}
	pkg, _ := conf.Check("version", fset, []*ast.File{f}, nil)
	out := map[string]string{}
	for _, name := range []string{"Version", "Repository", "Tag", "Image"} {
		c, ok := pkg.Scope().Lookup(name).(*types.Const)
		if !ok || c.Val().Kind() != constant.String {
			t.Fatalf("internal/version has no string constant %s (type-check: %v)", name, typeErrors)
		}
		out[name] = constant.StringVal(c.Val())
	}
	return out
}

// TestVersionIsTheRelease: Chart.yaml's version and appVersion are internal/version.Version, and the default
// values run the image of this release.
func TestVersionIsTheRelease(t *testing.T) {
	v := versionConstants(t)
	meta := loadChart(t).Metadata
	if meta.Version != v["Version"] || meta.AppVersion != v["Version"] {
		t.Errorf("Chart.yaml version %q, appVersion %q; internal/version.Version is %q (make manifests writes them)",
			meta.Version, meta.AppVersion, v["Version"])
	}
	out := mustRender(t, nil)
	d := decode[appsv1.Deployment](t, out.one(t, "Deployment", "steward"))
	if got := d.Spec.Template.Spec.Containers[0].Image; got != v["Image"] {
		t.Errorf("default image %q, want internal/version.Image %q", got, v["Image"])
	}
	var vals struct {
		Image struct {
			Repository string `json:"repository"`
		} `json:"image"`
	}
	if err := yaml.Unmarshal(readRepoFile(t, "charts/steward/values.yaml"), &vals); err != nil {
		t.Fatalf("parse values.yaml: %v", err)
	}
	if vals.Image.Repository != v["Repository"] {
		t.Errorf("values.yaml image.repository %q, want internal/version.Repository %q", vals.Image.Repository, v["Repository"])
	}
}

// TestCRDsAreTheGeneratedOnes: crds/ holds exactly config/crd/bases (make manifests copies them).
func TestCRDsAreTheGeneratedOnes(t *testing.T) {
	want, err := filepath.Glob("../../config/crd/bases/*.yaml")
	if err != nil || len(want) == 0 {
		t.Fatalf("no CRDs in config/crd/bases: %v", err)
	}
	got, err := filepath.Glob(chartDir + "/crds/*")
	if err != nil {
		t.Fatal(err)
	}
	names := func(paths []string) []string {
		var out []string
		for _, p := range paths {
			out = append(out, filepath.Base(p))
		}
		return out
	}
	if !slices.Equal(names(got), names(want)) {
		t.Fatalf("crds/ holds %q, config/crd/bases %q (make manifests copies them)", names(got), names(want))
	}
	for _, p := range want {
		a, _ := os.ReadFile(p)
		b, err := os.ReadFile(filepath.Join(chartDir, "crds", filepath.Base(p)))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("crds/%s differs from config/crd/bases (make manifests copies it): %v", filepath.Base(p), err)
		}
	}
	// Helm installs what it loads from crds/; make sure it loads every one.
	if n := len(loadChart(t).CRDObjects()); n != len(want) {
		t.Errorf("Helm loads %d CRDs from crds/, want %d", n, len(want))
	}
}

// TestKubeVersion: the chart installs on the oldest tested Kubernetes and on the newest, and Helm refuses older
// ones before rendering anything.
func TestKubeVersion(t *testing.T) {
	for version, ok := range map[string]bool{"v1.34.0": true, "v1.34.4": true, "v1.37.2": true, "v1.33.9": false, "v1.29.0": false} {
		t.Run(version, func(t *testing.T) {
			kube, err := chartutil.ParseKubeVersion(version)
			if err != nil {
				t.Fatal(err)
			}
			_, err = renderFor(t, releaseName, releaseNamespace, *kube, nil)
			switch {
			case ok && err != nil:
				t.Errorf("Kubernetes %s refused: %v", version, err)
			case !ok && (err == nil || !strings.Contains(err.Error(), "incompatible with Kubernetes")):
				t.Errorf("Kubernetes %s: %v, want refused as incompatible", version, err)
			}
		})
	}
}

// managerArgs renders the Deployment and returns its container's arguments.
func managerArgs(t *testing.T, out rendered) []string {
	t.Helper()
	d := decode[appsv1.Deployment](t, out.one(t, "Deployment", "steward"))
	return d.Spec.Template.Spec.Containers[0].Args
}

// TestDeployment checks what the golden files would let slip in a regeneration: the settings users and the
// design rely on.
func TestDeployment(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		out := mustRender(t, nil)
		d := decode[appsv1.Deployment](t, out.one(t, "Deployment", "steward"))
		spec := d.Spec.Template.Spec
		if *d.Spec.Replicas != 2 {
			t.Errorf("replicas %d, want 2", *d.Spec.Replicas)
		}
		c := spec.Containers[0]
		// The agent runs the operator's image, so a mirror set in image.repository serves both.
		for _, arg := range []string{"--leader-elect", "--metrics-bind-address=:8443", "--health-probe-bind-address=:8081", "--agent-image=" + c.Image} {
			if !slices.Contains(c.Args, arg) {
				t.Errorf("args %q lack %s", c.Args, arg)
			}
		}
		for _, arg := range c.Args {
			if strings.HasPrefix(arg, "--watch-namespace") {
				t.Errorf("default args carry %s", arg)
			}
		}
		// The same restrictions as config/manager/manager.yaml: Pod Security "restricted".
		psc := spec.SecurityContext
		if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil ||
			psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("pod securityContext %+v, want runAsNonRoot and seccomp RuntimeDefault", psc)
		}
		sc := c.SecurityContext
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.Capabilities == nil ||
			!reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("container securityContext %+v, want no privilege escalation, read-only root, drop ALL", sc)
		}
		if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" ||
			c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
			t.Errorf("probes %+v %+v, want /healthz and /readyz", c.LivenessProbe, c.ReadinessProbe)
		}
		if len(spec.TopologySpreadConstraints) != 1 || spec.TopologySpreadConstraints[0].TopologyKey != "kubernetes.io/hostname" {
			t.Errorf("topology spread %+v, want the default spread over nodes", spec.TopologySpreadConstraints)
		}
		if spec.ServiceAccountName != "steward" {
			t.Errorf("serviceAccountName %q, want steward", spec.ServiceAccountName)
		}
		out.one(t, "ServiceAccount", "steward")
		svc := decode[corev1.Service](t, out.one(t, "Service", "steward-metrics"))
		if !reflect.DeepEqual(svc.Spec.Selector, d.Spec.Selector.MatchLabels) {
			t.Errorf("metrics Service selects %v, the Deployment's Pods are %v", svc.Spec.Selector, d.Spec.Selector.MatchLabels)
		}
	})
	t.Run("profiling only when asked for, on the loopback address", func(t *testing.T) {
		for _, arg := range managerArgs(t, mustRender(t, nil)) {
			if strings.HasPrefix(arg, "--pprof-bind-address") {
				t.Errorf("default args carry %s", arg)
			}
		}
		args := managerArgs(t, mustRender(t, parseValues(t, "pprof: {enabled: true, port: 6060}")))
		if !slices.Contains(args, "--pprof-bind-address=127.0.0.1:6060") {
			t.Errorf("args %q lack --pprof-bind-address=127.0.0.1:6060", args)
		}
	})
	t.Run("leader election with one replica", func(t *testing.T) {
		// A rolling update runs two Pods even with replicaCount 1.
		if args := managerArgs(t, mustRender(t, parseValues(t, "replicaCount: 1"))); !slices.Contains(args, "--leader-elect") {
			t.Errorf("args %q lack --leader-elect", args)
		}
	})
	t.Run("a mirror serves the agent too, unless agentImage says otherwise", func(t *testing.T) {
		mirror := managerArgs(t, mustRender(t, parseValues(t, "image: {repository: registry.example/steward, tag: v9.9.9}")))
		if !slices.Contains(mirror, "--agent-image=registry.example/steward:v9.9.9") {
			t.Errorf("args %q: the agent is not the operator's mirrored image", mirror)
		}
		own := managerArgs(t, mustRender(t, parseValues(t, "agentImage: registry.example/agent:v1")))
		if !slices.Contains(own, "--agent-image=registry.example/agent:v1") {
			t.Errorf("args %q: agentImage not passed", own)
		}
	})
	t.Run("metrics off", func(t *testing.T) {
		out := mustRender(t, parseValues(t, "metrics: {enabled: false}"))
		if args := managerArgs(t, out); !slices.Contains(args, "--metrics-bind-address=0") {
			t.Errorf("args %q lack --metrics-bind-address=0", args)
		}
		if n := len(out.find("Service")); n != 0 {
			t.Errorf("metrics off renders %d Services", n)
		}
	})
	t.Run("selector labels win", func(t *testing.T) {
		out := mustRender(t, parseValues(t, "podLabels: {app.kubernetes.io/name: other, team: db}"))
		d := decode[appsv1.Deployment](t, out.one(t, "Deployment", "steward"))
		labels := d.Spec.Template.Labels
		if labels["app.kubernetes.io/name"] != "steward" || labels["team"] != "db" {
			t.Errorf("pod labels %v: want the selector's name kept and team added", labels)
		}
	})
	t.Run("existing service account", func(t *testing.T) {
		out := mustRender(t, parseValues(t, "serviceAccount: {create: false, name: platform-steward}"))
		if n := len(out.find("ServiceAccount")); n != 0 {
			t.Errorf("create: false renders %d ServiceAccounts", n)
		}
		d := decode[appsv1.Deployment](t, out.one(t, "Deployment", "steward"))
		if d.Spec.Template.Spec.ServiceAccountName != "platform-steward" {
			t.Errorf("serviceAccountName %q, want platform-steward", d.Spec.Template.Spec.ServiceAccountName)
		}
		binding := decode[rbacv1.ClusterRoleBinding](t, out.one(t, "ClusterRoleBinding", "steward-manager"))
		checkBinding(t, binding.RoleRef, binding.Subjects, "ClusterRole", "steward-manager", "platform-steward")
		_, err := render(t, parseValues(t, "serviceAccount: {create: false}"))
		if err == nil || !strings.Contains(err.Error(), "serviceAccount.name is required") {
			t.Errorf("create: false without a name: %v, want serviceAccount.name is required", err)
		}
	})
	t.Run("namespaced", func(t *testing.T) {
		args := managerArgs(t, mustRender(t, parseValues(t, "watchNamespaces: [team-a, team-b]")))
		if !slices.Contains(args, "--watch-namespace=team-a,team-b") {
			t.Errorf("args %q lack --watch-namespace=team-a,team-b", args)
		}
	})
	t.Run("names follow the release", func(t *testing.T) {
		out, err := renderFor(t, "etcd-operator", "ops", minKube, nil)
		if err != nil {
			t.Fatal(err)
		}
		binding := decode[rbacv1.ClusterRoleBinding](t, out.one(t, "ClusterRoleBinding", "etcd-operator-steward-manager"))
		if binding.Subjects[0].Name != "etcd-operator-steward" || binding.Subjects[0].Namespace != "ops" {
			t.Errorf("release etcd-operator in ops binds %+v", binding.Subjects)
		}
		out.one(t, "Deployment", "etcd-operator-steward")
	})
}

// lineDiff shows the first lines where two texts part, enough to see what changed without a diff tool.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		if i < len(w) && i < len(g) && w[i] == g[i] {
			continue
		}
		var b strings.Builder
		fmt.Fprintf(&b, "at line %d:\n", i+1)
		for j := i; j < i+5 && j < len(w); j++ {
			b.WriteString("- " + w[j] + "\n")
		}
		for j := i; j < i+5 && j < len(g); j++ {
			b.WriteString("+ " + g[j] + "\n")
		}
		return b.String()
	}
	return ""
}

// TestMetricsRBAC: with secure metrics (the default) the chart grants the operator what config/metrics-auth does,
// TokenReviews and SubjectAccessReviews, and ships the metrics-reader ClusterRole, cluster-wide and namespaced
// alike (the names of a namespaced release carry its namespace); none of it with metrics.secure false.
func TestMetricsRBAC(t *testing.T) {
	var auth, reader rbacv1.ClusterRole
	docs := strings.Split(string(readRepoFile(t, "config/metrics-auth/metrics_auth_role.yaml")), "\n---\n")
	if err := yaml.Unmarshal([]byte(docs[0]), &auth); err != nil || len(auth.Rules) != 2 {
		t.Fatalf("parse config/metrics-auth/metrics_auth_role.yaml: %v, %d rules", err, len(auth.Rules))
	}
	if err := yaml.Unmarshal(readRepoFile(t, "config/metrics-auth/metrics_reader_role.yaml"), &reader); err != nil || len(reader.Rules) != 1 {
		t.Fatalf("parse config/metrics-auth/metrics_reader_role.yaml: %v", err)
	}
	for values, prefix := range map[string]string{"": "steward", "watchNamespaces: [team-a]": "steward-" + releaseNamespace} {
		out := mustRender(t, parseValues(t, values))
		if got := decode[rbacv1.ClusterRole](t, out.one(t, "ClusterRole", prefix+"-metrics-auth")); !reflect.DeepEqual(got.Rules, auth.Rules) {
			t.Errorf("%q: metrics-auth rules %v, want config/metrics-auth's %v", values, got.Rules, auth.Rules)
		}
		binding := decode[rbacv1.ClusterRoleBinding](t, out.one(t, "ClusterRoleBinding", prefix+"-metrics-auth"))
		checkBinding(t, binding.RoleRef, binding.Subjects, "ClusterRole", prefix+"-metrics-auth", "steward")
		if got := decode[rbacv1.ClusterRole](t, out.one(t, "ClusterRole", prefix+"-metrics-reader")); !reflect.DeepEqual(got.Rules, reader.Rules) {
			t.Errorf("%q: metrics-reader rules %v, want config/metrics-auth's %v", values, got.Rules, reader.Rules)
		}
	}
	out := mustRender(t, parseValues(t, "metrics: {secure: false}"))
	for _, o := range out.find("ClusterRole") {
		if strings.Contains(o.Name, "metrics") {
			t.Errorf("metrics.secure false renders ClusterRole %s", o.Name)
		}
	}
}
