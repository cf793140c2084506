// Command bundle generates Steward's OLM bundle (bundle/ and bundle.Dockerfile) from the sources the kustomize
// install is made of: the CRDs in config/crd/bases, the RBAC rules in config/rbac/role.yaml (generated from the
// code's markers), the Deployment in config/manager, the samples in config/samples and the version in
// internal/version. It adds only what OLM needs and kustomize has no place for (descriptors, install modes,
// catalog text), so the three install paths cannot drift apart; `make verify` regenerates the bundle and fails
// when the committed one differs. It decides nothing at run time and is not part of the operator.
//
// Usage (from the repository root): go run ./hack/bundle [-root .]
package main

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"steward.dev/steward/internal/version"
)

// Package and channel of the bundle in a catalog. Steward's API is v1alpha1, so only the alpha channel exists.
const (
	packageName    = "steward"
	channel        = "alpha"
	csvFileName    = "steward.clusterserviceversion.yaml"
	operatorName   = "steward"
	dockerfileName = "bundle.Dockerfile"
)

// minKubeVersion is the oldest Kubernetes Steward is tested on: the oldest release of the test bed
// (internal/testbed KubernetesVersions), on which `make test-compat` runs an e2e subset. The API alone would allow
// 1.29: the CRDs' CEL rules call quantity() (EtcdCluster storage.size and etcd.quotaBackendBytes), a library of
// Kubernetes 1.28, and an API server checks new rules against the CEL environment of the release before its own;
// everything else Steward uses is older. 1.29 to 1.33 are not claimed because nothing runs Steward on them.
// test/bundle checks that this release accepts every rule; internal/testbed that it is the test bed's oldest.
const minKubeVersion = "1.34.0"

// targetNamespacesAnnotation is where OLM writes the namespaces an OperatorGroup selects, on the pod template
// of the CSV's Deployments: a comma-separated list, or "" for all namespaces, the same syntax as
// --watch-namespace.
const targetNamespacesAnnotation = "olm.targetNamespaces"

//go:embed description.md
var description string

//go:embed icon.svg
var iconSVG []byte

// bundleAnnotations are the bundle's metadata/annotations.yaml, and the LABELs of bundle.Dockerfile: OLM reads
// the one from the unpacked image, registries and opm the other, so both come from this one map.
var bundleAnnotations = map[string]string{
	"operators.operatorframework.io.bundle.mediatype.v1":       "registry+v1",
	"operators.operatorframework.io.bundle.manifests.v1":       "manifests/",
	"operators.operatorframework.io.bundle.metadata.v1":        "metadata/",
	"operators.operatorframework.io.bundle.package.v1":         packageName,
	"operators.operatorframework.io.bundle.channels.v1":        channel,
	"operators.operatorframework.io.bundle.channel.default.v1": channel,
}

func main() {
	root := flag.String("root", ".", "the repository's root directory")
	flag.Parse()
	if err := run(*root); err != nil {
		fmt.Fprintf(os.Stderr, "bundle: %v\n", err)
		os.Exit(1)
	}
}

func run(root string) error {
	src, err := readSources(root)
	if err != nil {
		return err
	}
	files, err := render(src)
	if err != nil {
		return err
	}
	// Start from an empty bundle/ so that a CRD removed from config/ leaves the bundle too.
	if err := os.RemoveAll(filepath.Join(root, "bundle")); err != nil {
		return fmt.Errorf("clear bundle/: %w", err)
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return fmt.Errorf("create %s: %w", filepath.Dir(name), err)
		}
		if err := os.WriteFile(path, files[name], 0o644); err != nil { //nolint:gosec // generated manifests are public
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}

// sources is everything the bundle is made of, read from the tree.
type sources struct {
	crds  []crdFile
	rules []rbacv1.PolicyRule
	// clusterRules are config/metrics-auth's, granted cluster-wide; clusterRoles ship in the bundle as they are.
	clusterRules []rbacv1.PolicyRule
	clusterRoles []namedObject
	deployment   appsv1.Deployment
	services     []namedObject
	samples      []map[string]any
}

type namedObject struct {
	name   string
	object map[string]any
}

type crdFile struct {
	name string // file name in config/crd/bases, kept in bundle/manifests
	raw  []byte
	crd  apiextensionsv1.CustomResourceDefinition
}

func readSources(root string) (sources, error) {
	var src sources
	crdDir := filepath.Join(root, "config", "crd", "bases")
	crdNames, err := filepath.Glob(filepath.Join(crdDir, "*.yaml"))
	if err != nil {
		return src, fmt.Errorf("list CRDs: %w", err)
	}
	if len(crdNames) == 0 {
		return src, fmt.Errorf("no CRDs in %s", crdDir)
	}
	for _, path := range crdNames {
		raw, err := os.ReadFile(path) //nolint:gosec // a path under the repository, from Glob
		if err != nil {
			return src, fmt.Errorf("read CRD: %w", err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
			return src, fmt.Errorf("parse CRD %s: %w", filepath.Base(path), err)
		}
		src.crds = append(src.crds, crdFile{name: filepath.Base(path), raw: raw, crd: crd})
	}

	var role rbacv1.ClusterRole
	if err := readObject(filepath.Join(root, "config", "rbac", "role.yaml"), &role); err != nil {
		return src, err
	}
	src.rules = role.Rules

	// The metrics endpoint's authentication and authorization (config/metrics-auth): the operator's right to
	// create TokenReviews and SubjectAccessReviews, cluster-scoped in every install mode, and the ClusterRole a
	// scraper needs, shipped as it is.
	var metricsAuth rbacv1.ClusterRole
	if err := readObject(filepath.Join(root, "config", "metrics-auth", "metrics_auth_role.yaml"), &metricsAuth); err != nil {
		return src, err
	}
	src.clusterRules = metricsAuth.Rules
	reader, err := os.ReadFile(filepath.Join(root, "config", "metrics-auth", "metrics_reader_role.yaml")) //nolint:gosec // a path under the repository
	if err != nil {
		return src, fmt.Errorf("read the metrics reader ClusterRole: %w", err)
	}
	var readerRole map[string]any
	if err := yaml.Unmarshal(reader, &readerRole); err != nil {
		return src, fmt.Errorf("parse config/metrics-auth/metrics_reader_role.yaml: %w", err)
	}
	readerName, _ := readerRole["metadata"].(map[string]any)["name"].(string)
	if readerRole["kind"] != "ClusterRole" || readerName == "" {
		return src, errors.New("config/metrics-auth/metrics_reader_role.yaml: not a named ClusterRole")
	}
	src.clusterRoles = append(src.clusterRoles, namedObject{name: readerName, object: readerRole})

	if err := readManager(root, &src); err != nil {
		return src, err
	}

	sampleNames, err := filepath.Glob(filepath.Join(root, "config", "samples", "*.yaml"))
	if err != nil {
		return src, fmt.Errorf("list samples: %w", err)
	}
	for _, path := range sampleNames {
		var sample map[string]any
		if err := readObject(path, &sample); err != nil {
			return src, err
		}
		src.samples = append(src.samples, sample)
	}
	return src, nil
}

// readManager reads the resources config/manager's kustomization lists, as kustomize would: the Deployment
// becomes the CSV's install strategy, Services ship in the bundle as they are, and the Namespace and
// ServiceAccount are OLM's to create. Any other kind is an error rather than silently left out of the bundle.
func readManager(root string, src *sources) error {
	dir := filepath.Join(root, "config", "manager")
	// Strict: a kustomize feature this reader does not apply (patches, a name prefix, ...) would make the bundle
	// differ from what kustomize installs, so it fails here until hack/bundle learns it. images is accepted
	// because the bundle pins this release's image anyway.
	var kustomization struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Resources  []string          `json:"resources"`
		Images     []json.RawMessage `json:"images"`
	}
	raw, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml")) //nolint:gosec // a path under the repository
	if err != nil {
		return fmt.Errorf("read config/manager/kustomization.yaml: %w", err)
	}
	if err := yaml.UnmarshalStrict(raw, &kustomization); err != nil {
		return fmt.Errorf("config/manager/kustomization.yaml: %w (hack/bundle reads only resources and images)", err)
	}
	var found bool
	for _, resource := range kustomization.Resources {
		name := filepath.Join("config", "manager", resource)
		docs, err := readDocuments(filepath.Join(dir, resource))
		if err != nil {
			return err
		}
		for _, doc := range docs {
			var meta struct {
				Kind     string
				Metadata struct{ Name string }
			}
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			switch meta.Kind {
			case "Namespace", "ServiceAccount":
				// OLM installs into the namespace the user chose, and creates the ServiceAccount the CSV's
				// permissions name.
			case "Deployment":
				if found {
					return fmt.Errorf("%s: a second Deployment; the bundle's CSV installs one", name)
				}
				if err := yaml.UnmarshalStrict(doc, &src.deployment); err != nil {
					return fmt.Errorf("%s: parse Deployment: %w", name, err)
				}
				found = true
			case "Service":
				// Kept as written (a typed Service would gain zero values such as targetPort: 0), less the
				// namespace, which OLM chooses.
				var service map[string]any
				if err := yaml.Unmarshal(doc, &service); err != nil {
					return fmt.Errorf("%s: parse Service: %w", name, err)
				}
				if metadata, ok := service["metadata"].(map[string]any); ok {
					delete(metadata, "namespace")
				}
				src.services = append(src.services, namedObject{name: meta.Metadata.Name, object: service})
			default:
				return fmt.Errorf("%s: %s %s: hack/bundle does not know how to ship this kind in the bundle", name, meta.Kind, meta.Metadata.Name)
			}
		}
	}
	if !found {
		return errors.New("config/manager: no Deployment")
	}
	return nil
}

// render returns the bundle's files by path below the repository root.
func render(src sources) (map[string][]byte, error) {
	files := map[string][]byte{}
	for _, c := range src.crds {
		// Byte for byte: the bundle installs exactly the CRDs kustomize does.
		files[filepath.Join("bundle", "manifests", c.name)] = c.raw
	}
	for _, role := range src.clusterRoles {
		out, err := marshalYAML(role.object)
		if err != nil {
			return nil, fmt.Errorf("marshal ClusterRole %s: %w", role.name, err)
		}
		files[filepath.Join("bundle", "manifests", role.name+"_rbac.authorization.k8s.io_v1_clusterrole.yaml")] = out
	}
	for _, service := range src.services {
		out, err := marshalYAML(service.object)
		if err != nil {
			return nil, fmt.Errorf("marshal Service %s: %w", service.name, err)
		}
		// operator-sdk's file naming, <name>_<group-version>_<kind>.yaml.
		files[filepath.Join("bundle", "manifests", service.name+"_v1_service.yaml")] = out
	}
	csv, err := buildCSV(src)
	if err != nil {
		return nil, err
	}
	out, err := marshalYAML(csv)
	if err != nil {
		return nil, fmt.Errorf("marshal CSV: %w", err)
	}
	files[filepath.Join("bundle", "manifests", csvFileName)] = out

	annotations, err := marshalYAML(map[string]any{"annotations": bundleAnnotations})
	if err != nil {
		return nil, fmt.Errorf("marshal annotations: %w", err)
	}
	files[filepath.Join("bundle", "metadata", "annotations.yaml")] = annotations
	files[dockerfileName] = dockerfile()
	return files, nil
}

func buildCSV(src sources) (clusterServiceVersion, error) {
	deployment, err := olmDeployment(src.deployment)
	if err != nil {
		return clusterServiceVersion{}, err
	}
	owned, err := ownedCRDs(src.crds)
	if err != nil {
		return clusterServiceVersion{}, err
	}
	examples, err := almExamples(src.samples)
	if err != nil {
		return clusterServiceVersion{}, err
	}
	if src.deployment.Namespace == "" {
		return clusterServiceVersion{}, errors.New("config/manager: the Deployment names no namespace to suggest to OLM's users")
	}
	serviceAccount := deployment.Spec.Template.Spec.ServiceAccountName
	if serviceAccount == "" {
		return clusterServiceVersion{}, errors.New("config/manager: the Deployment names no serviceAccountName to grant the RBAC rules to")
	}
	return clusterServiceVersion{
		APIVersion: "operators.coreos.com/v1alpha1",
		Kind:       "ClusterServiceVersion",
		Metadata: csvMetadata{
			Name: operatorName + ".v" + version.Version,
			Annotations: map[string]string{
				// No createdAt: a timestamp would make every `make bundle` differ and `make verify` fail.
				"alm-examples": examples,
				// Full Lifecycle (level 3 of 5) is what the e2e suite proves on a real cluster: install, etcd
				// upgrades and downgrades, backups and restores, member replacement and quorum-loss recovery.
				// Deep Insights (metrics, alerts) is not claimed until Steward ships them.
				"capabilities":   "Full Lifecycle",
				"categories":     "Database",
				"containerImage": version.Image,
				"description":    "Runs etcd clusters on Kubernetes by etcd's own rules: learners, one membership change at a time, quorum kept, verified backups and restores.",
				"repository":     "https://github.com/steward-dev/steward",
				"support":        "Steward project",
				// The namespace the console proposes: config/manager's, where kustomize installs Steward.
				"operatorframework.io/suggested-namespace": src.deployment.Namespace,
				// OpenShift's feature annotations, each stated rather than left to guess. All false: the etcd images
				// are referenced by tag from --etcd-image-repository (not digests in relatedImages), so a
				// disconnected cluster needs a mirror the user configures; backup Jobs are not given the cluster's
				// proxy settings; Steward does not read the cluster's TLS profile and has no cloud token auth.
				"features.operators.openshift.io/disconnected":     "false",
				"features.operators.openshift.io/fips-compliant":   "false",
				"features.operators.openshift.io/proxy-aware":      "false",
				"features.operators.openshift.io/tls-profiles":     "false",
				"features.operators.openshift.io/token-auth-aws":   "false",
				"features.operators.openshift.io/token-auth-azure": "false",
				"features.operators.openshift.io/token-auth-gcp":   "false",
				"features.operators.openshift.io/cnf":              "false",
				"features.operators.openshift.io/cni":              "false",
				"features.operators.openshift.io/csi":              "false",
			},
		},
		Spec: csvSpec{
			DisplayName:    "Steward",
			Description:    description,
			Version:        version.Version,
			Maturity:       "alpha",
			MinKubeVersion: minKubeVersion,
			Keywords:       []string{"etcd", "key-value", "database", "backup", "restore", "raft", "operator"},
			Maintainers:    []maintainer{{Name: "Steward maintainers", Email: "maintainers@steward.dev"}},
			Provider:       appLink{Name: "Steward project", URL: "https://steward.dev"},
			Links: []appLink{
				{Name: "Source code", URL: "https://github.com/steward-dev/steward"},
				{Name: "Documentation", URL: "https://github.com/steward-dev/steward/tree/main/docs"},
			},
			Icon: []icon{{Base64Data: base64.StdEncoding.EncodeToString(iconSVG), MediaType: "image/svg+xml"}},
			// Every mode: --watch-namespace takes a list, and OLM passes the OperatorGroup's namespaces to it
			// (olmDeployment). All of Steward's rules are on namespaced resources, so OLM's Roles in the target
			// namespaces are all it needs, but for the metrics endpoint's TokenReviews and SubjectAccessReviews.
			InstallModes: []installMode{
				{Type: "OwnNamespace", Supported: true},
				{Type: "SingleNamespace", Supported: true},
				{Type: "MultiNamespace", Supported: true},
				{Type: "AllNamespaces", Supported: true},
			},
			Install: installStrategy{
				Strategy: "deployment",
				Spec: installStrategySpec{
					// permissions, not clusterPermissions: OLM creates them as a Role in the operator's namespace
					// and copies it into every target namespace, and turns them into a ClusterRole only when the
					// OperatorGroup selects all namespaces. So a single-namespace install gets exactly
					// config/namespaced's rights and no cluster-wide ones.
					Permissions: []permission{{ServiceAccountName: serviceAccount, Rules: src.rules}},
					// The metrics endpoint asks the API server about each scraper: cluster-scoped requests.
					ClusterPermissions: clusterPermissions(serviceAccount, src.clusterRules),
					Deployments: []deploymentSpec{{
						Name:  deployment.Name,
						Label: deployment.Labels,
						Spec:  deployment.Spec,
					}},
				},
			},
			CustomResourceDefinitions: customResourceDefinitions{Owned: owned},
			// The one image holds the operator and steward-agent (backup, restore and verify Jobs).
			RelatedImages: []relatedImage{{Name: operatorName, Image: version.Image}},
		},
	}, nil
}

// olmDeployment adapts config/manager's Deployment to OLM: this release's image, for the operator and its Jobs,
// and the namespaces to watch from the OperatorGroup instead of a fixed flag.
func olmDeployment(d appsv1.Deployment) (appsv1.Deployment, error) {
	d = *d.DeepCopy()
	containers := d.Spec.Template.Spec.Containers
	i := slices.IndexFunc(containers, func(c corev1.Container) bool { return c.Name == "manager" })
	if i < 0 {
		return d, errors.New("config/manager: the Deployment has no container named manager")
	}
	c := &containers[i]
	c.Image = version.Image
	var args []string
	for _, arg := range c.Args {
		switch {
		case strings.HasPrefix(arg, "--watch-namespace"):
			// Replaced below: OLM, not the manifest, decides what to watch.
		case strings.HasPrefix(arg, "--agent-image="):
			args = append(args, "--agent-image="+version.Image)
		default:
			args = append(args, arg)
		}
	}
	// Kubernetes expands $(WATCH_NAMESPACE) from the env below; an empty value (AllNamespaces, or the
	// annotation missing) means every namespace to the flag.
	c.Args = append(args, "--watch-namespace=$(WATCH_NAMESPACE)")
	c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "WATCH_NAMESPACE" })
	c.Env = append(c.Env, corev1.EnvVar{
		Name: "WATCH_NAMESPACE",
		ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
			FieldPath: "metadata.annotations['" + targetNamespacesAnnotation + "']",
		}},
	})
	// OLM chooses the namespace; a name in the template would be ignored at best.
	d.Namespace = ""
	return d, nil
}

func ownedCRDs(crds []crdFile) ([]ownedCRD, error) {
	var owned []ownedCRD
	seen := map[string]bool{}
	for _, c := range crds {
		kind := c.crd.Spec.Names.Kind
		info, ok := kinds[kind]
		if !ok {
			return nil, fmt.Errorf("CRD %s: kind %s has no entry in hack/bundle's kinds (display name, resources, descriptors)", c.name, kind)
		}
		seen[kind] = true
		v, err := storageVersion(c.crd)
		if err != nil {
			return nil, fmt.Errorf("CRD %s: %w", c.name, err)
		}
		schema := v.Schema.OpenAPIV3Schema
		specDescriptors, err := descriptors(schema.Properties["spec"], info.spec, true, info.displayNames)
		if err != nil {
			return nil, fmt.Errorf("%s spec descriptor %w", kind, err)
		}
		statusDescriptors, err := descriptors(schema.Properties["status"], info.status, false, info.displayNames)
		if err != nil {
			return nil, fmt.Errorf("%s status descriptor %w", kind, err)
		}
		owned = append(owned, ownedCRD{
			Name:              c.crd.Name,
			Version:           v.Name,
			Kind:              kind,
			DisplayName:       info.displayName,
			Description:       summary(schema.Description),
			Resources:         info.resources,
			SpecDescriptors:   specDescriptors,
			StatusDescriptors: statusDescriptors,
		})
	}
	for kind := range kinds {
		if !seen[kind] {
			return nil, fmt.Errorf("hack/bundle describes kind %s, but config/crd/bases has no CRD for it", kind)
		}
	}
	sort.Slice(owned, func(i, j int) bool { return owned[i].Name < owned[j].Name })
	return owned, nil
}

func storageVersion(crd apiextensionsv1.CustomResourceDefinition) (apiextensionsv1.CustomResourceDefinitionVersion, error) {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				return v, fmt.Errorf("version %s has no schema", v.Name)
			}
			return v, nil
		}
	}
	return apiextensionsv1.CustomResourceDefinitionVersion{}, errors.New("no storage version")
}

// almExamples are the samples as OLM's alm-examples: a JSON list the console offers as a starting point when
// creating each kind. The namespace is dropped because the console creates in the namespace being viewed.
func almExamples(samples []map[string]any) (string, error) {
	if len(samples) == 0 {
		return "", errors.New("no samples in config/samples")
	}
	examples := make([]map[string]any, 0, len(samples))
	for _, s := range samples {
		s = runtime.DeepCopyJSON(s)
		if meta, ok := s["metadata"].(map[string]any); ok {
			delete(meta, "namespace")
		}
		examples = append(examples, s)
	}
	sort.Slice(examples, func(i, j int) bool {
		return fmt.Sprint(examples[i]["kind"]) < fmt.Sprint(examples[j]["kind"])
	})
	out, err := json.MarshalIndent(examples, "", "  ")
	if err != nil {
		return "", fmt.Errorf("marshal alm-examples: %w", err)
	}
	return string(out), nil
}

func dockerfile() []byte {
	var b bytes.Buffer
	b.WriteString("# Generated by `make bundle` (hack/bundle) from the same map as bundle/metadata/annotations.yaml; do not edit.\n")
	b.WriteString("# Build the bundle image from the repository root: docker build -f bundle.Dockerfile -t <registry>/steward-bundle:v" +
		version.Version + " .\n")
	b.WriteString("FROM scratch\n\n")
	for _, k := range slices.Sorted(maps.Keys(bundleAnnotations)) {
		fmt.Fprintf(&b, "LABEL %s=%s\n", k, bundleAnnotations[k])
	}
	b.WriteString("\nCOPY bundle/manifests /manifests/\nCOPY bundle/metadata /metadata/\n")
	return b.Bytes()
}

// marshalYAML writes v as YAML with a header saying where it comes from.
func marshalYAML(v any) ([]byte, error) {
	body, err := yaml.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append([]byte("# Generated by `make bundle` (hack/bundle); do not edit.\n"), body...), nil
}

func readObject(path string, into any) error {
	raw, err := os.ReadFile(path) //nolint:gosec // a path under the repository
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if err := yaml.Unmarshal(raw, into); err != nil {
		return fmt.Errorf("parse %s: %w", path, err)
	}
	return nil
}

// readDocuments splits a multi-document YAML file.
func readDocuments(path string) ([][]byte, error) {
	f, err := os.Open(path) //nolint:gosec // a path under the repository
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(f))
	var docs [][]byte
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		if len(bytes.TrimSpace(doc)) > 0 {
			docs = append(docs, doc)
		}
	}
}

// clusterPermissions grants rules cluster-wide to the ServiceAccount, none when there are none.
func clusterPermissions(serviceAccount string, rules []rbacv1.PolicyRule) []permission {
	if len(rules) == 0 {
		return nil
	}
	return []permission{{ServiceAccountName: serviceAccount, Rules: rules}}
}
