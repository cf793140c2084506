// Package manager holds the operator's process-wide options that both cmd/steward and the end-to-end tests
// apply to a controller-runtime manager: which namespaces it watches, and how many Events per object its recorder
// lets through. It decides nothing about etcd.
package manager

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// Namespaces is the repeatable, comma-separated --watch-namespace flag: the namespaces Steward manages. Empty
// means every namespace (a ClusterRole install); otherwise the manager's cache, and so every watch, list and
// get through it, is restricted to these namespaces, and Roles in them are all the RBAC Steward needs.
type Namespaces []string

// String implements flag.Value.
func (n *Namespaces) String() string { return strings.Join(*n, ",") }

// Set implements flag.Value: each value is one namespace or a comma-separated list; every name must be a
// valid namespace name. An empty value adds nothing, so it means every namespace unless another value names
// some: OLM hands Steward its OperatorGroup's target namespaces as --watch-namespace=$(WATCH_NAMESPACE), and
// that is "" for AllNamespaces (bundle/, hack/bundle). An empty item in a list ("prod,") is still an error.
func (n *Namespaces) Set(v string) error {
	if strings.TrimSpace(v) == "" {
		return nil
	}
	for _, ns := range strings.Split(v, ",") {
		ns = strings.TrimSpace(ns)
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("namespace %q: %s", ns, strings.Join(errs, "; "))
		}
		*n = append(*n, ns)
	}
	return nil
}

// CacheOptions restricts the manager's cache to the namespaces, or leaves it cluster-wide when there are none.
func (n Namespaces) CacheOptions() cache.Options {
	if len(n) == 0 {
		return cache.Options{}
	}
	namespaces := map[string]cache.Config{}
	for _, ns := range n {
		namespaces[ns] = cache.Config{}
	}
	return cache.Options{DefaultNamespaces: namespaces}
}

// Sorted returns the namespaces without repeats, for logs.
func (n Namespaces) Sorted() []string {
	seen := map[string]bool{}
	var out []string
	for _, ns := range n {
		if !seen[ns] {
			seen[ns] = true
			out = append(out, ns)
		}
	}
	sort.Strings(out)
	return out
}
