package bundle

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	apivalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

// admission validates objects against the generated CRDs the way the API server does on create: the OpenAPI
// schema (patterns, lengths) and the x-kubernetes-validations rules. Offline, so that every rule about names
// has a table test; test/e2e/hostile_test.go sends the same kinds of objects to a real API server.
type admission struct {
	schema     map[string]*structuralschema.Structural
	validators map[string]apivalidation.SchemaCreateValidator
}

func loadCRDs(t *testing.T) *admission {
	t.Helper()
	files, err := filepath.Glob("../../config/crd/bases/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs under config/crd/bases (%v): run make manifests", err)
	}
	a := &admission{schema: map[string]*structuralschema.Structural{}, validators: map[string]apivalidation.SchemaCreateValidator{}}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(raw, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		v := crd.Spec.Versions[0]
		var internal apiextensions.JSONSchemaProps
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, &internal, nil); err != nil {
			t.Fatal(err)
		}
		s, err := structuralschema.NewStructural(&internal)
		if err != nil {
			t.Fatal(err)
		}
		validator, _, err := apivalidation.NewSchemaValidator(&internal)
		if err != nil {
			t.Fatal(err)
		}
		a.schema[crd.Spec.Names.Kind], a.validators[crd.Spec.Names.Kind] = s, validator
	}
	return a
}

// errors is what the API server would say about creating obj, joined; "" when it would admit it.
func (a *admission) errors(t *testing.T, obj map[string]any) string {
	t.Helper()
	kind := obj["kind"].(string)
	s := a.schema[kind]
	if s == nil {
		t.Fatalf("no CRD of kind %s", kind)
	}
	errs := apivalidation.ValidateCustomResource(nil, obj, a.validators[kind])
	celErrs, _ := cel.NewValidator(s, true, celconfig.PerCallLimit).Validate(context.Background(), nil, s, obj, nil, celconfig.RuntimeCELCostBudget)
	if errs = append(errs, celErrs...); len(errs) == 0 {
		return ""
	}
	return errs.ToAggregate().Error()
}

// check fails t unless the API server would admit obj (want "") or refuse it saying want.
func (a *admission) check(t *testing.T, obj map[string]any, want string) {
	t.Helper()
	got := a.errors(t, obj)
	switch {
	case want == "" && got != "":
		t.Fatalf("refused: %s", got)
	case want != "" && got == "":
		t.Fatalf("admitted, want a refusal saying %q", want)
	case !strings.Contains(got, want):
		t.Fatalf("refusal %q does not say %q", got, want)
	}
}

func object(kind, name string, spec map[string]any) map[string]any {
	return map[string]any{"apiVersion": "etcd.steward.dev/v1alpha1", "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": "ns"}, "spec": spec}
}

func TestAdmissionOfNames(t *testing.T) {
	a := loadCRDs(t)
	cluster := func(name string) map[string]any {
		return object("EtcdCluster", name, map[string]any{"replicas": int64(1), "version": "3.6.16"})
	}
	pod := func(field string, m map[string]any) map[string]any {
		c := cluster("db")
		c["spec"].(map[string]any)["pod"] = map[string]any{field: m}
		return c
	}
	user := func(name, clusterName string) map[string]any {
		return object("EtcdUser", name, map[string]any{"clusterName": clusterName, "password": map[string]any{"secretName": "app-pw"},
			"permissions": []any{map[string]any{"prefix": "/app/", "access": "ReadWrite"}}})
	}
	backup := func(name, clusterName string) map[string]any {
		return object("EtcdBackup", name, map[string]any{"clusterName": clusterName,
			"destination": map[string]any{"pvc": map[string]any{"claimName": "backups", "path": "x.db"}}})
	}
	schedule := func(name, clusterName string) map[string]any {
		return object("EtcdBackupSchedule", name, map[string]any{"clusterName": clusterName, "schedule": "@hourly",
			"destination": map[string]any{"pvc": map[string]any{"claimName": "backups", "path": "nightly"}}})
	}
	restore := func(name, clusterName, backupName string) map[string]any {
		return object("EtcdRestore", name, map[string]any{"clusterName": clusterName, "backupName": backupName})
	}
	long := func(n int) string { return "a" + strings.Repeat("b", n-1) }
	tests := map[string]struct {
		obj  map[string]any
		want string // "" admitted, else part of the refusal
	}{
		"cluster name of 57 characters":           {cluster(long(57)), ""},
		"cluster name of 58 characters":           {cluster(long(58)), "at most 57 characters"},
		"cluster name of 63 characters":           {cluster(long(63)), "at most 57 characters"},
		"cluster name starting with a digit":      {cluster("1db"), "must start with a letter"},
		"cluster name with a dot":                 {cluster("db.prod"), "must start with a letter"},
		"cluster name ending with a dash":         {cluster("db-"), "must start with a letter"},
		"cluster named unknown":                   {cluster("unknown"), ""},
		"pod annotation of Steward's":             {pod("annotations", map[string]any{"etcd.steward.dev/tls-mode": "TLS"}), "annotations under etcd.steward.dev/"},
		"pod annotation of Steward's, initial":    {pod("annotations", map[string]any{"etcd.steward.dev/initial-cluster": "x=http://evil:2380"}), "annotations under etcd.steward.dev/"},
		"pod label of Steward's":                  {pod("labels", map[string]any{"etcd.steward.dev/member": "db-aaaaa"}), "labels under etcd.steward.dev/"},
		"pod annotations of others":               {pod("annotations", map[string]any{"prometheus.io/scrape": "true", "example.com/etcd.steward.dev": "x"}), ""},
		"pod labels of others":                    {pod("labels", map[string]any{"team": "a", "sub.etcd.steward.dev/x": "y"}), ""},
		"user of another namespace's cluster":     {user("app", "other-namespace/victim"), "spec.clusterName"},
		"user of a cluster named with a dot":      {user("app", "db.prod"), "spec.clusterName"},
		"user of a cluster":                       {user("app", "db"), ""},
		"user name of 64 characters":              {user(long(64), "db"), "at most 63 characters"},
		"user password Secret with a slash":       {object("EtcdUser", "app", map[string]any{"clusterName": "db", "password": map[string]any{"secretName": "../x"}, "permissions": []any{map[string]any{"prefix": "/a/", "access": "Read"}}}), "spec.password.secretName"},
		"backup of another namespace's cluster":   {backup("b", "other-namespace/victim"), "spec.clusterName"},
		"backup of a cluster":                     {backup(long(63), "db"), ""},
		"backup name of 64 characters":            {backup(long(64), "db"), "at most 63 characters"},
		"schedule of another namespace's cluster": {schedule("s", "other-namespace/victim"), "spec.clusterName"},
		"schedule name of 64 characters":          {schedule(long(64), "db"), "at most 63 characters"},
		"schedule of a cluster":                   {schedule("s", "db"), ""},
		"restore of another namespace's cluster":  {restore("r", "other-namespace/victim", "b"), "spec.clusterName"},
		"restore of another namespace's backup":   {restore("r", "db", "other-namespace/b"), "spec.backupName"},
		"restore name of 64 characters":           {restore(long(64), "db", "b"), "at most 63 characters"},
		"restore of a backup":                     {restore(long(63), "db", "b"), ""},
		"cluster from another namespace's backup": {func() map[string]any {
			c := cluster("db")
			c["spec"].(map[string]any)["bootstrap"] = map[string]any{"fromBackup": map[string]any{"backupName": "other/b"}}
			return c
		}(), "spec.bootstrap.fromBackup.backupName"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) { a.check(t, tt.obj, tt.want) })
	}
}

// TestAdmissionOfGCSDestinations: the rules of a GCS destination, offline (TestHostileSpecsAreRefused sends some
// to a real API server): exactly one destination, GCS bucket names, an endpoint URL, and no key file sent over
// plain HTTP.
func TestAdmissionOfGCSDestinations(t *testing.T) {
	a := loadCRDs(t)
	gcs := func(mutate func(map[string]any)) map[string]any {
		g := map[string]any{"bucket": "etcd-backups", "key": "prod/main"}
		mutate(g)
		return map[string]any{"gcs": g}
	}
	tests := map[string]struct {
		destination map[string]any
		want        string // "" admitted, else part of the refusal
	}{
		"Workload Identity":        {gcs(func(g map[string]any) { g["serviceAccountName"] = "etcd-backup" }), ""},
		"key file":                 {gcs(func(g map[string]any) { g["credentialsSecret"] = map[string]any{"name": "gcs-key"} }), ""},
		"emulator":                 {gcs(func(g map[string]any) { g["endpoint"] = "http://10.0.0.1:4443" }), ""},
		"private endpoint":         {gcs(func(g map[string]any) { g["endpoint"] = "https://storage-x.p.googleapis.com/storage/v1/" }), ""},
		"dotted bucket of 100":     {gcs(func(g map[string]any) { g["bucket"] = strings.Repeat("a", 50) + "." + strings.Repeat("b", 49) }), ""},
		"bucket with underscore":   {gcs(func(g map[string]any) { g["bucket"] = "etcd_backups" }), ""},
		"bucket uppercase":         {gcs(func(g map[string]any) { g["bucket"] = "Etcd" }), "spec.destination.gcs.bucket"},
		"bucket too short":         {gcs(func(g map[string]any) { g["bucket"] = "ab" }), "spec.destination.gcs.bucket"},
		"bucket of 64 without dot": {gcs(func(g map[string]any) { g["bucket"] = strings.Repeat("a", 64) }), "without dots has at most 63"},
		"bucket goog":              {gcs(func(g map[string]any) { g["bucket"] = "goog-etcd" }), "must not start with goog"},
		"empty key":                {gcs(func(g map[string]any) { g["key"] = "" }), "key must not be empty"},
		"absolute key":             {gcs(func(g map[string]any) { g["key"] = "/etcd" }), "key must not be empty"},
		"endpoint without scheme":  {gcs(func(g map[string]any) { g["endpoint"] = "storage.example.com" }), "http:// or https:// URL"},
		"endpoint with query":      {gcs(func(g map[string]any) { g["endpoint"] = "https://storage.example.com/?a=b" }), "http:// or https:// URL"},
		"key file over plain HTTP": {gcs(func(g map[string]any) {
			g["endpoint"], g["credentialsSecret"] = "http://10.0.0.1:4443", map[string]any{"name": "gcs-key"}
		}), "never sent over plain HTTP"},
		"bad service account": {gcs(func(g map[string]any) { g["serviceAccountName"] = "Etcd Backup" }), "serviceAccountName"},
		"gcs and pvc": {map[string]any{"gcs": map[string]any{"bucket": "etcd-backups", "key": "k"}, "pvc": map[string]any{"claimName": "c", "path": "p"}},
			"exactly one of pvc, s3, gcs or azure"},
	}
	checkDestinationAdmission(t, a, tests)
}

// TestAdmissionOfAzureDestinations: Azure's naming rules for accounts and containers, the key and endpoint rules
// GCS has, and no credentials over plain HTTP except Azurite's published development account.
func TestAdmissionOfAzureDestinations(t *testing.T) {
	a := loadCRDs(t)
	azure := func(mutate func(map[string]any)) map[string]any {
		g := map[string]any{"storageAccount": "prodbackups", "container": "etcd-backups", "key": "prod/main"}
		mutate(g)
		return map[string]any{"azure": g}
	}
	secret := map[string]any{"name": "azure-key"}
	tests := map[string]struct {
		destination map[string]any
		want        string // "" admitted, else part of the refusal
	}{
		"workload identity":  {azure(func(g map[string]any) { g["serviceAccountName"] = "etcd-backup" }), ""},
		"shared key":         {azure(func(g map[string]any) { g["credentialsSecret"] = secret }), ""},
		"private endpoint":   {azure(func(g map[string]any) { g["endpoint"] = "https://prodbackups.privatelink.blob.core.windows.net" }), ""},
		"Azurite, anonymous": {azure(func(g map[string]any) { g["endpoint"] = "http://10.0.0.1:10000/prodbackups" }), ""},
		"Azurite's development account with its key": {azure(func(g map[string]any) {
			g["storageAccount"], g["endpoint"], g["credentialsSecret"] = "devstoreaccount1", "http://10.0.0.1:10000/devstoreaccount1", secret
		}), ""},
		"container of 63":             {azure(func(g map[string]any) { g["container"] = strings.Repeat("a", 63) }), ""},
		"container of 3 with hyphen":  {azure(func(g map[string]any) { g["container"] = "a-b" }), ""},
		"account uppercase":           {azure(func(g map[string]any) { g["storageAccount"] = "ProdBackups" }), "spec.destination.azure.storageAccount"},
		"account with hyphen":         {azure(func(g map[string]any) { g["storageAccount"] = "prod-backups" }), "spec.destination.azure.storageAccount"},
		"account of 25":               {azure(func(g map[string]any) { g["storageAccount"] = strings.Repeat("a", 25) }), "spec.destination.azure.storageAccount"},
		"account of 2":                {azure(func(g map[string]any) { g["storageAccount"] = "ab" }), "spec.destination.azure.storageAccount"},
		"container of 64":             {azure(func(g map[string]any) { g["container"] = strings.Repeat("a", 64) }), "spec.destination.azure.container"},
		"container of 2":              {azure(func(g map[string]any) { g["container"] = "ab" }), "spec.destination.azure.container"},
		"container uppercase":         {azure(func(g map[string]any) { g["container"] = "Etcd" }), "spec.destination.azure.container"},
		"container with two hyphens":  {azure(func(g map[string]any) { g["container"] = "etcd--backups" }), "spec.destination.azure.container"},
		"container ending in hyphen":  {azure(func(g map[string]any) { g["container"] = "etcd-" }), "spec.destination.azure.container"},
		"container starting with '-'": {azure(func(g map[string]any) { g["container"] = "-etcd" }), "spec.destination.azure.container"},
		"empty key":                   {azure(func(g map[string]any) { g["key"] = "" }), "key must not be empty"},
		"absolute key":                {azure(func(g map[string]any) { g["key"] = "/etcd" }), "key must not be empty"},
		"endpoint without scheme":     {azure(func(g map[string]any) { g["endpoint"] = "prodbackups.blob.core.windows.net" }), "http:// or https:// URL"},
		"endpoint with a SAS query":   {azure(func(g map[string]any) { g["endpoint"] = "https://prodbackups.blob.core.windows.net/?sig=x" }), "http:// or https:// URL"},
		"a key over plain HTTP": {azure(func(g map[string]any) {
			g["endpoint"], g["credentialsSecret"] = "http://10.0.0.1:10000/prodbackups", secret
		}), "never sent over plain HTTP"},
		"bad service account": {azure(func(g map[string]any) { g["serviceAccountName"] = "Etcd Backup" }), "serviceAccountName"},
		"azure and gcs": {map[string]any{"azure": map[string]any{"storageAccount": "prodbackups", "container": "etcd", "key": "k"},
			"gcs": map[string]any{"bucket": "etcd-backups", "key": "k"}}, "exactly one of pvc, s3, gcs or azure"},
	}
	checkDestinationAdmission(t, a, tests)
}

// destinationCase is a destination and how admission answers it on an EtcdBackup and an EtcdBackupSchedule: ""
// admitted, else part of the refusal.
type destinationCase = struct {
	destination map[string]any
	want        string
}

// checkDestinationAdmission offers each case's destination to the CRDs in a, on a backup and on a schedule.
func checkDestinationAdmission(t *testing.T, a *admission, tests map[string]destinationCase) {
	t.Helper()
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			for _, obj := range []map[string]any{
				object("EtcdBackup", "b", map[string]any{"clusterName": "main", "destination": tt.destination}),
				object("EtcdBackupSchedule", "s", map[string]any{"clusterName": "main", "schedule": "@hourly", "destination": tt.destination}),
			} {
				got := a.errors(t, obj)
				switch {
				case tt.want == "" && got != "":
					t.Fatalf("%s refused: %s", obj["kind"], got)
				case tt.want != "" && !strings.Contains(got, tt.want):
					t.Fatalf("%s: refusal %q does not say %q", obj["kind"], got, tt.want)
				}
			}
		})
	}
}

// TestAdmissionOfAdoptions: the rules of spec.bootstrap.fromExisting (an adoption of a running etcd), offline:
// client URLs only, 1 to 9 of them, not beside fromBackup, no hibernation, a known handover. (The transition
// rules, which keep the source fixed and let handover change, need a real API server.)
func TestAdmissionOfAdoptions(t *testing.T) {
	a := loadCRDs(t)
	adopt := func(fromExisting map[string]any, extra func(spec map[string]any)) map[string]any {
		spec := map[string]any{"replicas": int64(3), "version": "3.6.16", "bootstrap": map[string]any{"fromExisting": fromExisting}}
		if extra != nil {
			extra(spec)
		}
		return object("EtcdCluster", "db", spec)
	}
	endpoints := func(eps ...string) map[string]any {
		list := make([]any, 0, len(eps))
		for _, e := range eps {
			list = append(list, e)
		}
		return map[string]any{"endpoints": list}
	}
	var ten []string
	for i := range 10 {
		ten = append(ten, "http://10.0.0."+string(rune('0'+i))+":2379")
	}
	tests := map[string]struct {
		obj  map[string]any
		want string
	}{
		"plaintext endpoints":       {adopt(endpoints("http://10.0.0.1:2379", "http://etcd-b.example:2379"), nil), ""},
		"TLS endpoint":              {adopt(endpoints("https://10.0.0.1:2379"), nil), ""},
		"no endpoint":               {adopt(endpoints(), nil), "spec.bootstrap.fromExisting.endpoints"},
		"ten endpoints":             {adopt(endpoints(ten...), nil), "spec.bootstrap.fromExisting.endpoints"},
		"endpoint with a path":      {adopt(endpoints("http://10.0.0.1:2379/v3"), nil), "spec.bootstrap.fromExisting.endpoints"},
		"endpoint without a scheme": {adopt(endpoints("10.0.0.1:2379"), nil), "spec.bootstrap.fromExisting.endpoints"},
		"unknown scheme":            {adopt(endpoints("unix:///run/etcd.sock"), nil), "spec.bootstrap.fromExisting.endpoints"},
		"handover Retire":           {adopt(map[string]any{"endpoints": []any{"http://10.0.0.1:2379"}, "handover": "Retire"}, nil), ""},
		"unknown handover":          {adopt(map[string]any{"endpoints": []any{"http://10.0.0.1:2379"}, "handover": "Now"}, nil), "handover"},
		"fromExisting and fromBackup": {adopt(endpoints("http://10.0.0.1:2379"), func(spec map[string]any) {
			spec["bootstrap"].(map[string]any)["fromBackup"] = map[string]any{"backupName": "b"}
		}), "at most one of fromBackup or fromExisting"},
		"hibernation of an adopting cluster": {adopt(endpoints("http://10.0.0.1:2379"), func(spec map[string]any) {
			spec["hibernation"] = map[string]any{"enabled": true}
		}), "cannot hibernate"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) { a.check(t, tt.obj, tt.want) })
	}
}

// updateErrors is what the API server would say about updating old to obj (transition rules see both); "" when
// it would admit it.
func (a *admission) updateErrors(t *testing.T, obj, old map[string]any) string {
	t.Helper()
	kind := obj["kind"].(string)
	s := a.schema[kind]
	errs := apivalidation.ValidateCustomResource(nil, obj, a.validators[kind])
	celErrs, _ := cel.NewValidator(s, true, celconfig.PerCallLimit).Validate(context.Background(), nil, s, obj, old, celconfig.RuntimeCELCostBudget)
	if errs = append(errs, celErrs...); len(errs) == 0 {
		return ""
	}
	return errs.ToAggregate().Error()
}

// TestAdmissionOfStandby: spec.standby's rules on create (a source of any destination type, auth on, no
// bootstrap, a fencing window of at least 2m) and on update (set only at creation, source immutable, promotion
// one-way, never removed).
func TestAdmissionOfStandby(t *testing.T) {
	a := loadCRDs(t)
	standby := func(mutate func(spec, sb map[string]any)) map[string]any {
		sb := map[string]any{"source": map[string]any{"clusterName": "main",
			"destination": map[string]any{"s3": map[string]any{"endpoint": "minio.storage:9000", "bucket": "etcd", "key": "prod/main"}}}}
		spec := map[string]any{"replicas": int64(3), "version": "3.6.16", "auth": map[string]any{"enabled": true}, "standby": sb}
		mutate(spec, sb)
		return object("EtcdCluster", "dr", spec)
	}
	same := func(map[string]any, map[string]any) {}
	create := map[string]struct {
		obj  map[string]any
		want string // "" admitted, else part of the refusal
	}{
		"S3 source": {standby(same), ""},
		"PVC source": {standby(func(_, sb map[string]any) {
			sb["source"].(map[string]any)["destination"] = map[string]any{"pvc": map[string]any{"claimName": "shared", "path": "main"}}
		}), ""},
		"encrypted": {standby(func(_, sb map[string]any) {
			sb["source"].(map[string]any)["encryption"] = map[string]any{"keySecret": map[string]any{"name": "k"}}
		}), ""},
		"window of 2m":       {standby(func(_, sb map[string]any) { sb["fencingWindow"] = "2m" }), ""},
		"window of 1m":       {standby(func(_, sb map[string]any) { sb["fencingWindow"] = "1m" }), "fencingWindow must be at least 2m"},
		"without auth":       {standby(func(spec, _ map[string]any) { delete(spec, "auth") }), "a standby needs auth.enabled"},
		"auth off":           {standby(func(spec, _ map[string]any) { spec["auth"] = map[string]any{"enabled": false} }), "a standby needs auth.enabled"},
		"promoted, auth off": {standby(func(spec, sb map[string]any) { delete(spec, "auth"); sb["promote"] = true }), ""},
		"with bootstrap": {standby(func(spec, _ map[string]any) {
			spec["bootstrap"] = map[string]any{"fromBackup": map[string]any{"backupName": "b"}}
		}), "bootstrap cannot be combined with standby"},
		"no destination": {standby(func(_, sb map[string]any) { delete(sb["source"].(map[string]any), "destination") }), "spec.standby.source.destination"},
		"two destinations": {standby(func(_, sb map[string]any) {
			sb["source"].(map[string]any)["destination"].(map[string]any)["pvc"] = map[string]any{"claimName": "c", "path": "p"}
		}), "exactly one of pvc, s3, gcs or azure"},
		"source of another namespace": {standby(func(_, sb map[string]any) { sb["source"].(map[string]any)["clusterName"] = "other/main" }), "spec.standby.source.clusterName"},
	}
	seed := func(spec map[string]any) map[string]any {
		spec["clusterName"], spec["standbySeed"] = "dr", map[string]any{"clusterName": "main"}
		spec["destination"] = map[string]any{"s3": map[string]any{"endpoint": "minio.storage:9000", "bucket": "etcd", "key": "prod/main"}}
		return object("EtcdBackup", "dr-standby-seed", spec)
	}
	create["seed"] = struct {
		obj  map[string]any
		want string
	}{seed(map[string]any{}), ""}
	create["seed that deletes the primary's snapshot"] = struct {
		obj  map[string]any
		want string
	}{seed(map[string]any{"deletionPolicy": "Delete"}), "needs deletionPolicy Retain"}
	create["seed at a point in time"] = struct {
		obj  map[string]any
		want string
	}{seed(map[string]any{"pointInTime": map[string]any{"scheduleName": "nightly"}}), "needs deletionPolicy Retain and no pointInTime"}
	for name, tt := range create {
		t.Run("create "+name, func(t *testing.T) {
			got := a.errors(t, tt.obj)
			switch {
			case tt.want == "" && got != "":
				t.Fatalf("refused: %s", got)
			case tt.want != "" && !strings.Contains(got, tt.want):
				t.Fatalf("refusal %q does not say %q", got, tt.want)
			}
		})
	}
	ordinary := object("EtcdCluster", "dr", map[string]any{"replicas": int64(3), "version": "3.6.16", "auth": map[string]any{"enabled": true}})
	update := map[string]struct {
		old, obj map[string]any
		want     string
	}{
		"promote":         {standby(same), standby(func(_, sb map[string]any) { sb["promote"] = true }), ""},
		"force promotion": {standby(same), standby(func(_, sb map[string]any) { sb["promote"], sb["forcePromotion"] = true, true }), ""},
		"scale":           {standby(same), standby(func(spec, _ map[string]any) { spec["replicas"] = int64(5) }), ""},
		"auth off once promoted": {standby(func(_, sb map[string]any) { sb["promote"] = true }),
			standby(func(spec, sb map[string]any) { sb["promote"] = true; spec["auth"] = map[string]any{"enabled": false} }), ""},
		"undo promotion": {standby(func(_, sb map[string]any) { sb["promote"] = true }), standby(same), "promote cannot be undone"},
		"another source": {standby(same), standby(func(_, sb map[string]any) { sb["source"].(map[string]any)["clusterName"] = "other" }),
			"standby.source is immutable"},
		"standby added later": {ordinary, standby(same), "standby can only be set when the cluster is created"},
		"standby removed":     {standby(func(_, sb map[string]any) { sb["promote"] = true }), ordinary, "standby can only be set when the cluster is created"},
	}
	for name, tt := range update {
		t.Run("update "+name, func(t *testing.T) {
			got := a.updateErrors(t, tt.obj, tt.old)
			switch {
			case tt.want == "" && got != "":
				t.Fatalf("refused: %s", got)
			case tt.want != "" && !strings.Contains(got, tt.want):
				t.Fatalf("refusal %q does not say %q", got, tt.want)
			}
		})
	}
}
