package resources

import (
	"reflect"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// FuzzParseInitialCluster: whatever parses names members without separators in their names, renders back to a
// string that parses to the same members, and FormatInitialCluster of the parsed members is canonical (sorted:
// formatting twice gives the same string).
func FuzzParseInitialCluster(f *testing.F) {
	for _, s := range []string{"a=http://a:2380,b=http://b:2380", "a=u,a=v", "", "a=u=v", ",", "=", "a=u,,b=v", "b=2,a=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		peers, err := ParseInitialCluster(s)
		if err != nil {
			if peers != nil {
				t.Fatalf("ParseInitialCluster(%q) returned members %v with error %v", s, peers, err)
			}
			return
		}
		if len(peers) == 0 {
			t.Fatalf("ParseInitialCluster(%q) accepted no members", s)
		}
		for name, url := range peers {
			if name == "" || url == "" || strings.ContainsAny(name, ",=") || strings.Contains(url, ",") {
				t.Fatalf("ParseInitialCluster(%q): entry %q=%q", s, name, url)
			}
		}
		formatted := FormatInitialCluster(peers)
		again, err := ParseInitialCluster(formatted)
		if err != nil || !reflect.DeepEqual(again, peers) {
			t.Fatalf("round trip of %q: %v, %v", s, again, err)
		}
		if FormatInitialCluster(again) != formatted {
			t.Fatalf("format of %q is not canonical", s)
		}
	})
}

// FuzzMemberNameFromPeerURL: peer URLs come from etcd's member list, which is not Steward's to trust. A URL is
// recognised as one of this cluster's members only if it is exactly the URL that member advertises with http or
// https (a member switching between plaintext and TLS has either; no other URL maps to its name) and the name is
// a DNS label under the cluster's prefix; every name Steward gives is recognised from its own URLs.
func FuzzMemberNameFromPeerURL(f *testing.F) {
	c := testCluster()
	for _, s := range []string{
		PeerURL(c, "db-abcde", opts), "http://db-abcde.db-peer.prod.svc.cluster.local:2380/", "https://db-abcde.db-peer.prod.svc.cluster.local:2380",
		"http://.db-peer.prod.svc.cluster.local:2380", "http://db-.db-peer.prod.svc.cluster.local:2380", "http://x.db-abcde.db-peer.prod.svc.cluster.local:2380",
		"http://other-abcde.db-peer.prod.svc.cluster.local:2380", "http://db-ABCDE.db-peer.prod.svc.cluster.local:2380", "http://10.0.0.1:2380", "",
	} {
		f.Add(s, "db-abcde")
	}
	f.Fuzz(func(t *testing.T, url, name string) {
		if got, ok := MemberNameFromPeerURL(c, url, opts); ok {
			if PeerURLWith(c, got, "http", opts) != url && PeerURLWith(c, got, "https", opts) != url {
				t.Fatalf("%q recognised as %q, whose peer URL is %q", url, got, PeerURL(c, got, opts))
			}
			if !strings.HasPrefix(got, c.Name+"-") || len(validation.IsDNS1123Label(got)) > 0 {
				t.Fatalf("%q recognised as %q: not a member name of cluster %s", url, got, c.Name)
			}
		}
		// Names Steward gives: <cluster>-<suffix>, a DNS label.
		if !strings.HasPrefix(name, c.Name+"-") || len(validation.IsDNS1123Label(name)) > 0 {
			return
		}
		for _, scheme := range []string{"http", "https"} {
			if got, ok := MemberNameFromPeerURL(c, PeerURLWith(c, name, scheme, opts), opts); !ok || got != name {
				t.Fatalf("own member %q not recognised from its %s peer URL: %q %v", name, scheme, got, ok)
			}
		}
	})
}

// FuzzQuotaBackendBytesArg: spec.etcd.quotaBackendBytes is a Kubernetes quantity that Steward turns into etcd's
// --quota-backend-bytes integer. For every quantity admission accepts (CEL: above 0, at most 100Gi) the flag is
// a positive decimal integer of bytes, never below the quantity (fractions round up, never to 0) and never
// above 100Gi.
func FuzzQuotaBackendBytesArg(f *testing.F) {
	for _, s := range []string{"8Gi", "1", "0.5", "100Gi", "1e3", "1500m", "2G", "0", "-1", "101Gi", "1k", "1.5Ki"} {
		f.Add(s)
	}
	limit := resource.MustParse("100Gi")
	f.Fuzz(func(t *testing.T, s string) {
		q, err := resource.ParseQuantity(s)
		if err != nil || q.Sign() <= 0 || q.Cmp(limit) > 0 {
			return // refused at admission
		}
		c := testCluster(func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Etcd.QuotaBackendBytes = &q })
		v, ok := arg(etcdArgs(c, boot, opts), "--quota-backend-bytes")
		if !ok {
			t.Fatalf("%q: no --quota-backend-bytes", s)
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 || n > limit.Value() {
			t.Fatalf("%q: --quota-backend-bytes=%s (%v)", s, v, err)
		}
		if resource.NewQuantity(n, resource.BinarySI).Cmp(q) < 0 {
			t.Fatalf("%q: --quota-backend-bytes=%d is below the quantity", s, n)
		}
	})
}

// FuzzJobNames: a backup's Job names go into label values, so for every valid EtcdBackup name (a DNS subdomain)
// both Job names are valid DNS subdomains and label values of at most 63 characters, and the two differ.
func FuzzJobNames(f *testing.F) {
	for _, s := range []string{"b", strings.Repeat("b", 63), strings.Repeat("a", 55) + "." + strings.Repeat("b", 20), strings.Repeat("x-", 40) + "y", "a.b-c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if len(validation.IsDNS1123Subdomain(name)) > 0 {
			return // the API server refuses such a name
		}
		b := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name}}
		snap, del := BackupJobName(b), DeleteJobName(b)
		for _, n := range []string{snap, del} {
			if errs := append(validation.IsDNS1123Subdomain(n), validation.IsValidLabelValue(n)...); len(errs) > 0 {
				t.Fatalf("backup %q: Job name %q: %v", name, n, errs)
			}
		}
		if snap == del {
			t.Fatalf("backup %q: both Jobs named %q", name, snap)
		}
	})
}
