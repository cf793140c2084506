package manager

import (
	"flag"
	"reflect"
	"testing"
)

func TestNamespacesFlag(t *testing.T) {
	tests := map[string]struct {
		args    []string
		want    []string
		wantErr bool
	}{
		"unset: cluster-wide":                       {nil, nil, false},
		"empty: cluster-wide (OLM's AllNamespaces)": {[]string{"--watch-namespace="}, nil, false},
		"blank: cluster-wide":                       {[]string{"--watch-namespace= "}, nil, false},
		"empty next to a name":                      {[]string{"--watch-namespace=", "--watch-namespace=prod"}, []string{"prod"}, false},
		"one":                                       {[]string{"--watch-namespace=prod"}, []string{"prod"}, false},
		"repeated":                                  {[]string{"--watch-namespace=prod", "--watch-namespace=staging"}, []string{"prod", "staging"}, false},
		"comma list and spaces":                     {[]string{"--watch-namespace=prod, staging"}, []string{"prod", "staging"}, false},
		"repeats collapse":                          {[]string{"--watch-namespace=b,a,b"}, []string{"a", "b"}, false},
		"empty item":                                {[]string{"--watch-namespace=prod,"}, nil, true},
		"not a namespace name":                      {[]string{"--watch-namespace=Prod_1"}, nil, true},
		"path traversal":                            {[]string{"--watch-namespace=../kube-system"}, nil, true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var n Namespaces
			fs := flag.NewFlagSet("steward", flag.ContinueOnError)
			fs.SetOutput(new(nopWriter))
			fs.Var(&n, "watch-namespace", "")
			err := fs.Parse(tt.args)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parse %v: error %v, want error %v", tt.args, err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if got := n.Sorted(); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("namespaces %v, want %v", got, tt.want)
			}
			opts := n.CacheOptions()
			if len(tt.want) == 0 {
				if opts.DefaultNamespaces != nil {
					t.Fatalf("cluster-wide install restricted to %v", opts.DefaultNamespaces)
				}
				return
			}
			var cached []string
			for ns := range opts.DefaultNamespaces {
				cached = append(cached, ns)
			}
			if got := Namespaces(cached).Sorted(); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("cache restricted to %v, want %v", got, tt.want)
			}
		})
	}
}

type nopWriter struct{}

func (*nopWriter) Write(p []byte) (int, error) { return len(p), nil }
