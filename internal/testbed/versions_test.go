package testbed

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestKubernetesRelease(t *testing.T) {
	for _, tc := range []struct {
		requested, want, err string
	}{
		{"", KubernetesVersion, ""},
		{"v1.37.2", "v1.37.2", ""},
		{"1.37.2", "v1.37.2", ""},
		{"1.34", "v1.34.4", ""},
		{"v1.34", "v1.34.4", ""},
		{" 1.34.4 ", "v1.34.4", ""},
		{"1.3", "", "not \"1.3\""},
		{"1.35", "", "not \"1.35\""},
		{"1.34.5", "", "not \"1.34.5\""},
		{"newest", KubernetesVersions[0], ""},
		{"oldest", "v1.34.4", ""},
		{"latest", "", "STEWARD_TESTBED_KUBERNETES"},
	} {
		got, err := kubernetesRelease(tc.requested)
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("kubernetesRelease(%q) = %q, %v; want %q, error containing %q", tc.requested, got, err, tc.want, tc.err)
		}
	}
}

// TestKubernetesModulesPinTheirRelease: each release of KubernetesVersions builds from a module that requires
// exactly it (and staging modules of the same release), and the default is the newest.
func TestKubernetesModulesPinTheirRelease(t *testing.T) {
	if KubernetesVersions[0] != KubernetesVersion {
		t.Fatalf("KubernetesVersions starts with %s, want the default %s first", KubernetesVersions[0], KubernetesVersion)
	}
	for _, v := range KubernetesVersions {
		data, err := os.ReadFile(filepath.Join("third_party", kubernetesModule(v), "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		mod := string(data)
		if !regexp.MustCompile(`(?m)^require k8s\.io/kubernetes ` + regexp.QuoteMeta(v) + `$`).MatchString(mod) {
			t.Errorf("%s/go.mod does not require k8s.io/kubernetes %s", kubernetesModule(v), v)
		}
		staging := "v0." + strings.TrimPrefix(v, "v1.")
		for _, m := range regexp.MustCompile(`(?m)^\t(k8s\.io/\S+) => \S+ (\S+)$`).FindAllStringSubmatch(mod, -1) {
			if m[2] != staging {
				t.Errorf("%s/go.mod replaces %s with %s, want %s", kubernetesModule(v), m[1], m[2], staging)
			}
		}
	}
}

// TestClaimedFloorIsTheOldestTested: the Helm chart's kubeVersion and the OLM bundle's minKubeVersion claim the
// oldest release the test bed runs (KubernetesVersions' last, the one `make test-compat` runs on), no older.
func TestClaimedFloorIsTheOldestTested(t *testing.T) {
	floor := KubernetesVersions[len(KubernetesVersions)-1]
	major, minorNumber := kubernetesMinor(floor)
	minor := major + "." + minorNumber + ".0"
	for file, pattern := range map[string]string{
		"../../charts/steward/Chart.yaml":                           `(?m)^kubeVersion: ">=` + regexp.QuoteMeta(minor) + `-0"$`,
		"../../bundle/manifests/steward.clusterserviceversion.yaml": `(?m)^  minKubeVersion: ` + regexp.QuoteMeta(minor) + `$`,
	} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(pattern).Match(data) {
			t.Errorf("%s does not claim Kubernetes %s, the oldest release the test bed runs (want a line matching %s)", file, minor, pattern)
		}
	}
}

func TestContainerdRelease(t *testing.T) {
	for _, tc := range []struct {
		requested, want, err string
	}{
		{"", ContainerdVersion, ""},
		{"1.6", SystemContainerd, ""},
		{"2", ContainerdVersion, ""},
		{"2.4", ContainerdVersion, ""},
		{" v2.4.2", ContainerdVersion, ""},
		{"2.4.2", ContainerdVersion, ""},
		{"2.1", "", "not \"2.1\""},
		{"1.7", "", "STEWARD_TESTBED_CONTAINERD"},
		{"24", "", "not \"24\""},
	} {
		got, err := containerdRelease(tc.requested)
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("containerdRelease(%q) = %q, %v; want %q, error containing %q", tc.requested, got, err, tc.want, tc.err)
		}
	}
}

// TestContainerdModulePinsItsRelease: containerd 2 builds from a module that requires exactly ContainerdVersion.
func TestContainerdModulePinsItsRelease(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("third_party", containerdSet().module, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^require github\.com/containerd/containerd/v2 ` + regexp.QuoteMeta(ContainerdVersion) + `$`).Match(data) {
		t.Errorf("%s/go.mod does not require github.com/containerd/containerd/v2 %s", containerdSet().module, ContainerdVersion)
	}
}
