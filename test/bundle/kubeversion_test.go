package bundle

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/operator-framework/api/pkg/manifests"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	"k8s.io/apimachinery/pkg/util/version"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// TestMinKubeVersionAcceptsTheCRDs derives the oldest Kubernetes that accepts the CRDs' CEL validation rules and
// checks that the CSV's minKubeVersion is not lower (OLM would install the bundle where the API server refuses the
// CRDs). It may be higher: the claim is the oldest release Steward is tested on (hack/bundle's minKubeVersion).
//
// An API server of release 1.N compiles a new rule in the CEL environment of release 1.(N-1), so that a rollback
// still understands it (k8s.io/apiserver/pkg/cel/environment, DefaultCompatibilityVersion). The environments
// below are those, as versioned by the apiserver library; the rules are compiled as the API server does on CRD
// create (the structural schema of each node with rules, its CEL type, the per-call cost limit).
func TestMinKubeVersionAcceptsTheCRDs(t *testing.T) {
	bundle, err := manifests.GetBundleFromDir(bundleDir)
	if err != nil {
		t.Fatalf("load %s: %v (run make bundle)", bundleDir, err)
	}
	claimed, err := version.ParseGeneric(bundle.CSV.Spec.MinKubeVersion)
	if err != nil {
		t.Fatalf("minKubeVersion %q: %v", bundle.CSV.Spec.MinKubeVersion, err)
	}
	var rules int
	var oldest *version.Version
	var refusedByTheOneBefore []string
	// From 1.25, when CEL validation rules became available by default, to the newest environment the library
	// knows (it panics past its own release).
	for minor := uint(25); minor <= 31; minor++ {
		release := version.MajorMinor(1, minor)
		envSet := environment.MustBaseEnvSet(version.MajorMinor(1, minor-1), true)
		var refused []string
		rules = 0
		for _, crd := range bundle.V1CRDs {
			n, errs := compileCRD(crd, envSet)
			rules += n
			refused = append(refused, errs...)
		}
		if len(refused) == 0 {
			oldest = release
			break
		}
		refusedByTheOneBefore = refused
	}
	if rules == 0 {
		t.Fatal("no CEL rules found in the CRDs; this test would prove nothing")
	}
	if oldest == nil {
		t.Fatalf("no Kubernetes up to 1.31 accepts every rule: %s", strings.Join(refusedByTheOneBefore, "\n"))
	}
	var firstLines []string
	for _, e := range refusedByTheOneBefore {
		line, _, _ := strings.Cut(e, "\n")
		firstLines = append(firstLines, line)
	}
	t.Logf("%d rules; the oldest Kubernetes that accepts them all is %s; the release before refuses:\n%s",
		rules, oldest, strings.Join(firstLines, "\n"))
	if claimed.LessThan(oldest) {
		t.Fatalf("minKubeVersion %s, but the CRDs' rules need %s (hack/bundle's minKubeVersion)", claimed, oldest)
	}
}

// compileCRD compiles every x-kubernetes-validations rule of every served version of crd and returns how many
// there are and the compile errors.
func compileCRD(crd *apiextensionsv1.CustomResourceDefinition, envSet *environment.EnvSet) (int, []string) {
	var rules int
	var errs []string
	for _, v := range crd.Spec.Versions {
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		var internal apiextensions.JSONSchemaProps
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, &internal, nil); err != nil {
			errs = append(errs, fmt.Sprintf("%s %s: convert schema: %v", crd.Name, v.Name, err))
			continue
		}
		structural, err := structuralschema.NewStructural(&internal)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s %s: structural schema: %v", crd.Name, v.Name, err))
			continue
		}
		n, e := compileNode(structural, true, crd.Name+" "+v.Name, envSet)
		rules += n
		errs = append(errs, e...)
	}
	return rules, errs
}

func compileNode(s *structuralschema.Structural, isRoot bool, path string, envSet *environment.EnvSet) (int, []string) {
	var rules int
	var errs []string
	if len(s.XValidations) > 0 {
		rules += len(s.XValidations)
		results, err := cel.Compile(s, model.SchemaDeclType(s, isRoot), celconfig.PerCallLimit, envSet, cel.NewExpressionsEnvLoader())
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", path, err))
		}
		for i, r := range results {
			if r.Error != nil {
				errs = append(errs, fmt.Sprintf("%s: rule %q: %v", path, s.XValidations[i].Rule, r.Error))
			}
			if r.MessageExpressionError != nil {
				errs = append(errs, fmt.Sprintf("%s: messageExpression of rule %q: %v", path, s.XValidations[i].Rule, r.MessageExpressionError))
			}
		}
	}
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		child := s.Properties[name]
		n, e := compileNode(&child, false, path+"."+name, envSet)
		rules += n
		errs = append(errs, e...)
	}
	if s.Items != nil {
		n, e := compileNode(s.Items, false, path+"[*]", envSet)
		rules += n
		errs = append(errs, e...)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Structural != nil {
		n, e := compileNode(s.AdditionalProperties.Structural, false, path+"{*}", envSet)
		rules += n
		errs = append(errs, e...)
	}
	return rules, errs
}
