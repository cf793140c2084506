package bundle

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/operator-framework/api/pkg/manifests"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/operator-framework/api/pkg/validation"
	validationerrors "github.com/operator-framework/api/pkg/validation/errors"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// bundleDir is the generated bundle, relative to this package's directory (go test runs tests there).
const bundleDir = "../../bundle"

const csvPath = "manifests/steward.clusterserviceversion.yaml"

// testedKubeVersion is the Kubernetes the e2e suite runs on (internal/testbed); minKubeVersion in the CSV is the
// oldest one Steward claims. The deprecated-API checks run against both: an API removed by either fails.
const testedKubeVersion = "1.34"

// allowedWarnings are validator warnings that are accepted, each with the reason. Any other warning fails the
// test like an error, so a new one is looked at rather than scrolled past.
var allowedWarnings = map[string]string{
	// OLM's best practice names channels by release tier (candidate, fast, stable). Steward's API is v1alpha1
	// and its releases are not tiered yet, so its one channel says what it is: alpha, operator-sdk's default.
	// Switch to stable-v1 (or candidate/fast/stable) when the API reaches v1.
	`channel(s) ["alpha"] are not following the recommended naming convention`: "alpha channel for a v1alpha1 API",
}

// validators are the ones `operator-sdk bundle validate --select-optional suite=operatorframework` runs, with the
// non-deprecated replacements of the OperatorHub validator (OperatorHubV2, StandardCapabilities,
// StandardCategories).
var validators = validation.DefaultBundleValidators.WithValidators(
	validation.OperatorHubV2Validator,
	validation.StandardCapabilitiesValidator,
	validation.StandardCategoriesValidator,
	validation.GoodPracticesValidator,
	validation.AlphaDeprecatedAPIsValidator,
	validation.ObjectValidator,
)

// problems loads the bundle in dir and returns the validators' errors and warnings, and Steward's own checks'
// findings as errors. A bundle that does not load is one error.
func problems(t *testing.T, dir, kubeVersion string) (errs, warns []string) {
	t.Helper()
	bundle, err := manifests.GetBundleFromDir(dir)
	if err != nil {
		return []string{fmt.Sprintf("load bundle: %v", err)}, nil
	}
	// As operator-sdk does: each object of the bundle (the CSV and CRD validators check only objects of their
	// own type) and the bundle itself, which ObjectsToValidate ends with, then the options.
	objs := append(bundle.ObjectsToValidate(), map[string]string{"k8s-version": kubeVersion})
	results := validators.Validate(objs...)
	for _, result := range results {
		for _, e := range result.Errors {
			errs = append(errs, describe(e))
		}
		for _, w := range result.Warnings {
			warns = append(warns, describe(w))
		}
	}
	for _, err := range stewardChecks(bundle) {
		errs = append(errs, err.Error())
	}
	return errs, warns
}

func describe(e validationerrors.Error) string {
	return fmt.Sprintf("%s: %s", e.Type, e.Error())
}

func TestBundleIsValid(t *testing.T) {
	bundle, err := manifests.GetBundleFromDir(bundleDir)
	if err != nil {
		t.Fatalf("load %s: %v (run make bundle)", bundleDir, err)
	}
	for name, kubeVersion := range map[string]string{
		"minKubeVersion": bundle.CSV.Spec.MinKubeVersion,
		"tested version": testedKubeVersion,
	} {
		t.Run(name, func(t *testing.T) {
			errs, warns := problems(t, bundleDir, kubeVersion)
			for _, e := range errs {
				t.Errorf("error: %s", e)
			}
			for _, w := range warns {
				if reason, ok := allowedWarningFor(w); ok {
					t.Logf("accepted warning (%s): %s", reason, w)
					continue
				}
				t.Errorf("warning: %s", w)
			}
			t.Logf("Kubernetes %s: %d errors, %d warnings", kubeVersion, len(errs), len(warns))
		})
	}
}

func allowedWarningFor(warning string) (string, bool) {
	for fragment, reason := range allowedWarnings {
		if strings.Contains(warning, fragment) {
			return reason, true
		}
	}
	return "", false
}

// TestBundleContents checks what the validators accept but Steward's users rely on.
func TestBundleContents(t *testing.T) {
	bundle, err := manifests.GetBundleFromDir(bundleDir)
	if err != nil {
		t.Fatalf("load %s: %v (run make bundle)", bundleDir, err)
	}
	csv := bundle.CSV
	tests := map[string]struct {
		got, want any
	}{
		"channels":        {bundle.Channels, []string{"alpha"}},
		"default channel": {bundle.DefaultChannel, "alpha"},
		"CSV name":        {csv.Name, "steward.v" + csv.Spec.Version.String()},
		"capability level": {
			csv.Annotations["capabilities"], "Full Lifecycle",
		},
		"owned CRDs": {ownedNames(csv), crdNames(bundle)},
		"one example per owned kind": {
			exampleKinds(t, csv), ownedKinds(csv),
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if fmt.Sprint(tt.got) != fmt.Sprint(tt.want) {
				t.Fatalf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
}

// TestBundleMetadata checks the annotations that place the bundle in a catalog, in both places they are read
// from: metadata/annotations.yaml (OLM, opm) and the LABELs of bundle.Dockerfile (registries, opm on an image).
func TestBundleMetadata(t *testing.T) {
	want := map[string]string{
		"operators.operatorframework.io.bundle.mediatype.v1":       "registry+v1",
		"operators.operatorframework.io.bundle.manifests.v1":       "manifests/",
		"operators.operatorframework.io.bundle.metadata.v1":        "metadata/",
		"operators.operatorframework.io.bundle.package.v1":         "steward",
		"operators.operatorframework.io.bundle.channels.v1":        "alpha",
		"operators.operatorframework.io.bundle.channel.default.v1": "alpha",
	}
	raw, err := os.ReadFile(filepath.Join(bundleDir, "metadata", "annotations.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct{ Annotations map[string]string }
	if err := yaml.UnmarshalStrict(raw, &file); err != nil {
		t.Fatalf("annotations.yaml: %v", err)
	}
	dockerfile, err := os.ReadFile(filepath.Join(bundleDir, "..", "bundle.Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{}
	for _, line := range strings.Split(string(dockerfile), "\n") {
		if label, ok := strings.CutPrefix(line, "LABEL "); ok {
			k, v, _ := strings.Cut(label, "=")
			labels[k] = v
		}
	}
	for name, got := range map[string]map[string]string{"annotations.yaml": file.Annotations, "bundle.Dockerfile": labels} {
		t.Run(name, func(t *testing.T) {
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("got %v\nwant %v", got, want)
			}
		})
	}
	// The image's layout must be what the annotations say.
	for _, line := range []string{"COPY bundle/manifests /manifests/", "COPY bundle/metadata /metadata/"} {
		if !strings.Contains(string(dockerfile), line+"\n") {
			t.Errorf("bundle.Dockerfile: no %q", line)
		}
	}
}

// TestBrokenBundlesFail makes sure the checks above can fail: each case breaks a copy of the bundle in one way
// and expects an error naming the problem.
func TestBrokenBundlesFail(t *testing.T) {
	tests := map[string]struct {
		breakIt   func(t *testing.T, dir string)
		wantError string
	}{
		"owned CRD missing from the CSV": {
			editCSV(func(csv map[string]any) {
				owned := path(csv, "spec", "customresourcedefinitions")["owned"].([]any)
				path(csv, "spec", "customresourcedefinitions")["owned"] = owned[1:]
			}),
			"is present in bundle",
		},
		"owned CRD's file missing from the bundle": {
			func(t *testing.T, dir string) {
				t.Helper()
				if err := os.Remove(filepath.Join(dir, "manifests", "etcd.steward.dev_etcdclusters.yaml")); err != nil {
					t.Fatal(err)
				}
			},
			`owned CRD "etcd.steward.dev/v1alpha1, Kind=EtcdCluster" not found in bundle`,
		},
		"no install mode supported": {
			editCSV(func(csv map[string]any) {
				for _, m := range path(csv, "spec")["installModes"].([]any) {
					m.(map[string]any)["supported"] = false
				}
			}),
			"none of InstallModeTypes are supported",
		},
		"unknown install mode": {
			editCSV(func(csv map[string]any) {
				modes := path(csv, "spec")["installModes"].([]any)
				modes[0].(map[string]any)["type"] = "EveryNamespace"
			}),
			`install mode "EveryNamespace"`,
		},
		"install mode twice": {
			editCSV(func(csv map[string]any) {
				modes := path(csv, "spec")["installModes"].([]any)
				path(csv, "spec")["installModes"] = append(modes, modes[0])
			}),
			"twice",
		},
		"alm-examples not JSON": {
			editCSV(func(csv map[string]any) {
				path(csv, "metadata", "annotations")["alm-examples"] = `[{"apiVersion": "etcd.steward.dev/v1alpha1",`
			}),
			"invalid example",
		},
		"alm-examples of a kind the bundle does not own": {
			editCSV(func(csv map[string]any) {
				path(csv, "metadata", "annotations")["alm-examples"] = `[{"apiVersion": "etcd.steward.dev/v1alpha1", "kind": "EtcdProxy", "metadata": {"name": "x"}}]`
			}),
			"example must have a provided API",
		},
		"capability level outside the standard five": {
			editCSV(func(csv map[string]any) {
				path(csv, "metadata", "annotations")["capabilities"] = "Autopilot"
			}),
			"capabilities",
		},
		"minKubeVersion not a version": {
			editCSV(func(csv map[string]any) {
				path(csv, "spec")["minKubeVersion"] = "1.29+"
			}),
			"MinKubeVersion has an invalid value",
		},
		"target namespaces not passed to the operator": {
			editCSV(func(csv map[string]any) {
				container := managerContainer(csv)
				delete(container, "env")
			}),
			"olm.targetNamespaces",
		},
		"CRD without its spec": {
			func(t *testing.T, dir string) {
				t.Helper()
				file := filepath.Join(dir, "manifests", "etcd.steward.dev_etcdrestores.yaml")
				writeFile(t, file, []byte("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"+
					"metadata: {name: etcdrestores.etcd.steward.dev}\nspec: {}\n"))
			},
			"etcdrestores.etcd.steward.dev",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			dir := copyBundle(t)
			tt.breakIt(t, dir)
			errs, _ := problems(t, dir, testedKubeVersion)
			if len(errs) == 0 {
				t.Fatalf("no error; want one containing %q", tt.wantError)
			}
			if !slices.ContainsFunc(errs, func(e string) bool { return strings.Contains(e, tt.wantError) }) {
				t.Fatalf("errors %q; want one containing %q", errs, tt.wantError)
			}
		})
	}
}

// stewardChecks are promises of Steward's CSV that operator-framework's validators do not check: they accept
// unknown or repeated install modes, and know nothing of how the operator learns its namespaces.
func stewardChecks(bundle *manifests.Bundle) []error {
	csv := bundle.CSV
	if csv == nil {
		return []error{fmt.Errorf("no CSV")}
	}
	var errs []error
	known := []operatorsv1alpha1.InstallModeType{
		operatorsv1alpha1.InstallModeTypeOwnNamespace, operatorsv1alpha1.InstallModeTypeSingleNamespace,
		operatorsv1alpha1.InstallModeTypeMultiNamespace, operatorsv1alpha1.InstallModeTypeAllNamespaces,
	}
	seen := map[operatorsv1alpha1.InstallModeType]bool{}
	for _, m := range csv.Spec.InstallModes {
		if !slices.Contains(known, m.Type) {
			errs = append(errs, fmt.Errorf("install mode %q: not one of %v", m.Type, known))
		}
		if seen[m.Type] {
			errs = append(errs, fmt.Errorf("install mode %q listed twice", m.Type))
		}
		seen[m.Type] = true
		// Steward supports every mode (--watch-namespace takes a list); a mode turned off is a regression.
		if !m.Supported {
			errs = append(errs, fmt.Errorf("install mode %q not supported", m.Type))
		}
	}
	errs = append(errs, checkWatchNamespace(csv)...)
	return errs
}

// checkWatchNamespace: OLM writes the OperatorGroup's namespaces to the pod template's olm.targetNamespaces
// annotation; only an env var from it and --watch-namespace=$(WATCH_NAMESPACE) make the operator watch them.
func checkWatchNamespace(csv *operatorsv1alpha1.ClusterServiceVersion) []error {
	deployments := csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs
	if len(deployments) != 1 {
		return []error{fmt.Errorf("%d Deployments, want 1", len(deployments))}
	}
	containers := deployments[0].Spec.Template.Spec.Containers
	i := slices.IndexFunc(containers, func(c corev1.Container) bool { return c.Name == "manager" })
	if i < 0 {
		return []error{fmt.Errorf("no manager container")}
	}
	c := containers[i]
	var errs []error
	env := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "WATCH_NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil &&
			e.ValueFrom.FieldRef.FieldPath == "metadata.annotations['olm.targetNamespaces']"
	})
	if env < 0 {
		errs = append(errs, fmt.Errorf("manager: no WATCH_NAMESPACE from metadata.annotations['olm.targetNamespaces']"))
	}
	if !slices.Contains(c.Args, "--watch-namespace=$(WATCH_NAMESPACE)") {
		errs = append(errs, fmt.Errorf("manager: no --watch-namespace=$(WATCH_NAMESPACE) among %q", c.Args))
	}
	if image := csv.Annotations["containerImage"]; c.Image != image {
		errs = append(errs, fmt.Errorf("manager image %q, containerImage annotation %q", c.Image, image))
	}
	return errs
}

func ownedNames(csv *operatorsv1alpha1.ClusterServiceVersion) []string {
	var names []string
	for _, o := range csv.Spec.CustomResourceDefinitions.Owned {
		names = append(names, o.Name)
	}
	slices.Sort(names)
	return names
}

func ownedKinds(csv *operatorsv1alpha1.ClusterServiceVersion) []string {
	var kinds []string
	for _, o := range csv.Spec.CustomResourceDefinitions.Owned {
		kinds = append(kinds, o.Kind)
	}
	slices.Sort(kinds)
	return kinds
}

func crdNames(bundle *manifests.Bundle) []string {
	var names []string
	for _, crd := range bundle.V1CRDs {
		names = append(names, crd.Name)
	}
	slices.Sort(names)
	return names
}

func exampleKinds(t *testing.T, csv *operatorsv1alpha1.ClusterServiceVersion) []string {
	t.Helper()
	var examples []struct{ Kind string }
	if err := yaml.Unmarshal([]byte(csv.Annotations["alm-examples"]), &examples); err != nil {
		t.Fatalf("alm-examples: %v", err)
	}
	var kinds []string
	for _, e := range examples {
		kinds = append(kinds, e.Kind)
	}
	slices.Sort(kinds)
	return kinds
}

// copyBundle copies bundle/ into a temporary directory to break.
func copyBundle(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	err := filepath.WalkDir(bundleDir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(bundleDir, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		raw, err := os.ReadFile(p) //nolint:gosec // a file of the bundle being copied
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), raw, 0o600)
	})
	if err != nil {
		t.Fatalf("copy bundle: %v", err)
	}
	return dir
}

// editCSV returns a breakIt that changes the CSV of a bundle copy as a generic object, so that it can be made
// into something OLM's typed CSV would not represent.
func editCSV(edit func(csv map[string]any)) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
		t.Helper()
		file := filepath.Join(dir, csvPath)
		raw, err := os.ReadFile(file) //nolint:gosec // the test's own temporary copy
		if err != nil {
			t.Fatal(err)
		}
		var csv map[string]any
		if err := yaml.Unmarshal(raw, &csv); err != nil {
			t.Fatalf("parse CSV: %v", err)
		}
		edit(csv)
		out, err := yaml.Marshal(csv)
		if err != nil {
			t.Fatalf("marshal CSV: %v", err)
		}
		writeFile(t, file, out)
	}
}

func writeFile(t *testing.T, file string, data []byte) {
	t.Helper()
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// path walks nested maps: path(csv, "spec", "install") is csv["spec"]["install"].
func path(obj map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		obj = obj[k].(map[string]any)
	}
	return obj
}

func managerContainer(csv map[string]any) map[string]any {
	deployments := path(csv, "spec", "install", "spec")["deployments"].([]any)
	podSpec := path(deployments[0].(map[string]any), "spec", "template", "spec")
	for _, c := range podSpec["containers"].([]any) {
		if c.(map[string]any)["name"] == "manager" {
			return c.(map[string]any)
		}
	}
	panic("no manager container in the CSV")
}
