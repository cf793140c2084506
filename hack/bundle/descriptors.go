package main

import (
	"cmp"
	"fmt"
	"strings"
	"unicode"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// x-descriptors the OpenShift console and OperatorHub understand (OLM's descriptor reference). Only these
// change how a field is shown or edited; anything else is plain text.
const (
	xText = "urn:alm:descriptor:com.tectonic.ui:text"
	// xShown is the status descriptors' plain value; the com.tectonic.ui ones are form widgets for spec.
	xShown         = "urn:alm:descriptor:text"
	xNumber        = "urn:alm:descriptor:com.tectonic.ui:number"
	xPodCount      = "urn:alm:descriptor:com.tectonic.ui:podCount"
	xBooleanSwitch = "urn:alm:descriptor:com.tectonic.ui:booleanSwitch"
	xAdvanced      = "urn:alm:descriptor:com.tectonic.ui:advanced"
	xResources     = "urn:alm:descriptor:com.tectonic.ui:resourceRequirements"
	xNodeAffinity  = "urn:alm:descriptor:com.tectonic.ui:nodeAffinity"
	xStorageClass  = "urn:alm:descriptor:io.kubernetes:StorageClass"
	xPVC           = "urn:alm:descriptor:io.kubernetes:PersistentVolumeClaim"
	xSecret        = "urn:alm:descriptor:io.kubernetes:Secret" //nolint:gosec // a descriptor name, not a credential
	xConditions    = "urn:alm:descriptor:io.kubernetes.conditions"
	xSelectPrefix  = "urn:alm:descriptor:com.tectonic.ui:select:"
	// xResourcePrefix + group:version:Kind makes the console offer the objects of that kind to pick from.
	xResourcePrefix = "urn:alm:descriptor:io.kubernetes:"
)

// resourceOf is the x-descriptor of a field that names one of Steward's own objects.
func resourceOf(kind string) string {
	return xResourcePrefix + "etcd.steward.dev:v1alpha1:" + kind
}

// field is one descriptor to publish: where it is and how the console should show it. Its display name and
// description are not written here but read from the CRD's schema (the API types' doc comments), so they
// cannot drift from what `kubectl explain` says; a path the schema does not have fails generation.
type field struct {
	path         string
	xDescriptors []string
}

// kindInfo is what the CSV says about one owned CRD beyond its schema.
type kindInfo struct {
	displayName string
	// resources are the kinds of objects the CRD's controller creates for one object of the kind (its Owns()
	// and what it creates without owning), so the console can list them under it.
	resources []resourceReference
	spec      []field
	status    []field
	// displayNames override, by path in spec or status, the name made from a path's last element where that
	// loses its context ("tls.provider" would be "Provider").
	displayNames map[string]string
}

var (
	pods        = resourceReference{Name: "pods", Kind: "Pod", Version: "v1"}
	pvcs        = resourceReference{Name: "persistentvolumeclaims", Kind: "PersistentVolumeClaim", Version: "v1"}
	services    = resourceReference{Name: "services", Kind: "Service", Version: "v1"}
	secrets     = resourceReference{Name: "secrets", Kind: "Secret", Version: "v1"}
	pdbs        = resourceReference{Name: "poddisruptionbudgets", Kind: "PodDisruptionBudget", Version: "v1"}
	jobs        = resourceReference{Name: "jobs", Kind: "Job", Version: "v1"}
	certs       = resourceReference{Name: "certificates", Kind: "Certificate", Version: "v1"}
	etcdBackups = resourceReference{Name: "etcdbackups", Kind: "EtcdBackup", Version: "v1alpha1"}
	etcdRestore = resourceReference{Name: "etcdrestores", Kind: "EtcdRestore", Version: "v1alpha1"}
)

// kinds lists every kind Steward serves. A CRD in config/crd/bases without an entry here fails generation, so
// a new kind cannot be shipped without its descriptors.
var kinds = map[string]kindInfo{
	"EtcdCluster": {
		displayName: "etcd Cluster",
		// Certificates only with tls.provider CertManager; EtcdRestores when quorumLossRecovery restores by
		// itself or bootstrap.fromBackup seeds a new cluster.
		resources: []resourceReference{pods, pvcs, services, secrets, pdbs, certs, etcdRestore},
		spec: []field{
			{"replicas", []string{xPodCount}},
			{"version", []string{xText}},
			{"storage.size", []string{xText}},
			{"storage.storageClassName", []string{xStorageClass}},
			{"storage.ephemeral", []string{xBooleanSwitch, xAdvanced}},
			{"tls.provider", nil}, // select: from the schema's enum
			{"tls.certificateLifetime", []string{xText, xAdvanced}},
			{"resources", []string{xResources}},
			{"pod.affinity.nodeAffinity", []string{xNodeAffinity, xAdvanced}},
			{"replaceUnhealthyAfter", []string{xText, xAdvanced}},
			{"quorumLossRecovery.policy", []string{xAdvanced}},
			{"quorumLossRecovery.after", []string{xText, xAdvanced}},
			{"bootstrap.fromBackup.backupName", []string{resourceOf("EtcdBackup"), xAdvanced}},
			{"image", []string{xText, xAdvanced}},
			{"auth.enabled", []string{xBooleanSwitch}},
			{"paused", []string{xBooleanSwitch}},
		},
		status: []field{
			{"conditions", []string{xConditions}},
			{"readyReplicas", []string{xPodCount}},
			{"currentVersion", []string{xShown}},
			{"leader", []string{xShown}},
			{"clientEndpoint", []string{xShown}},
			{"clusterID", []string{xShown}},
			{"lastBackup.name", []string{resourceOf("EtcdBackup")}},
			{"tls.notAfter", []string{xShown}},
		},
		displayNames: map[string]string{
			"storage.size":                    "Storage Size",
			"tls.provider":                    "TLS Provider",
			"tls.certificateLifetime":         "TLS Certificate Lifetime",
			"quorumLossRecovery.policy":       "Quorum Loss Recovery",
			"quorumLossRecovery.after":        "Quorum Loss Recovery After",
			"bootstrap.fromBackup.backupName": "Bootstrap From Backup",
			"image":                           "etcd Image",
			"version":                         "etcd Version",
			"tls.notAfter":                    "Certificates Expire",
		},
	},
	"EtcdBackup": {
		displayName: "etcd Backup",
		resources:   []resourceReference{jobs},
		spec: []field{
			{"clusterName", []string{resourceOf("EtcdCluster")}},
			{"destination.pvc.claimName", []string{xPVC}},
			{"destination.pvc.path", []string{xText}},
			{"destination.s3.endpoint", []string{xText}},
			{"destination.s3.bucket", []string{xText}},
			{"destination.s3.key", []string{xText}},
			{"destination.s3.credentialsSecret.name", []string{xSecret}},
			{"deletionPolicy", nil},
		},
		status: []field{
			{"conditions", []string{xConditions}},
			{"location", []string{xShown}},
			{"sizeBytes", []string{xShown}},
			{"revision", []string{xShown}},
			{"etcdVersion", []string{xShown}},
			{"completionTime", []string{xShown}},
		},
		displayNames: map[string]string{
			"destination.pvc.claimName": "PVC",
			"destination.pvc.path":      "PVC Path",
			"destination.s3.endpoint":   "S3 Endpoint",
			"destination.s3.bucket":     "S3 Bucket",
			"destination.s3.key":        "S3 Key",
			"etcdVersion":               "etcd Version",
		},
	},
	"EtcdBackupSchedule": {
		displayName: "etcd Backup Schedule",
		resources:   []resourceReference{etcdBackups},
		spec: []field{
			{"clusterName", []string{resourceOf("EtcdCluster")}},
			{"schedule", []string{xText}},
			{"destination.pvc.claimName", []string{xPVC}},
			{"destination.s3.bucket", []string{xText}},
			{"destination.s3.credentialsSecret.name", []string{xSecret}},
			{"retention.maxCount", []string{xNumber}},
			{"retention.maxAge", []string{xText}},
			{"suspend", []string{xBooleanSwitch}},
			{"concurrencyPolicy", []string{xAdvanced}},
		},
		status: []field{
			{"conditions", []string{xConditions}},
			{"lastSuccessfulBackup.name", []string{resourceOf("EtcdBackup")}},
			{"nextScheduleTime", []string{xShown}},
		},
		displayNames: map[string]string{
			"destination.pvc.claimName": "PVC",
			"destination.s3.bucket":     "S3 Bucket",
			"retention.maxCount":        "Keep at Most",
			"retention.maxAge":          "Keep for at Most",
		},
	},
	"EtcdRestore": {
		displayName: "etcd Restore",
		resources:   []resourceReference{jobs},
		spec: []field{
			{"clusterName", []string{resourceOf("EtcdCluster")}},
			{"backupName", []string{resourceOf("EtcdBackup")}},
			{"confirm", []string{xText}},
		},
		status: []field{
			{"conditions", []string{xConditions}},
			{"mode", []string{xShown}},
			{"previousClusterID", []string{xShown}},
		},
	},
	"EtcdUser": {
		displayName: "etcd User",
		resources:   []resourceReference{secrets},
		spec: []field{
			{"clusterName", []string{resourceOf("EtcdCluster")}},
			{"userName", []string{xText, xAdvanced}},
			{"certificate.secretName", []string{xText}},
			{"password.secretName", []string{xText}},
		},
		status: []field{
			{"conditions", []string{xConditions}},
			{"userName", []string{xShown}},
			{"certificateSecretName", []string{xSecret}},
			{"passwordSecretName", []string{xSecret}},
			{"certificateNotAfter", []string{xShown}},
			{"authEnabled", []string{xShown}},
		},
		displayNames: map[string]string{
			"certificate.secretName": "Certificate Secret",
			"password.secretName":    "Password Secret",
		},
	},
}

// descriptors builds the descriptors of fields under root (the CRD's spec or status schema). Enums of spec
// fields become selects; status is only shown, so its enums stay text.
func descriptors(root apiextensionsv1.JSONSchemaProps, fields []field, isSpec bool, names map[string]string) ([]descriptor, error) {
	out := make([]descriptor, 0, len(fields))
	for _, f := range fields {
		schema, doc, err := lookup(root, f.path)
		if err != nil {
			return nil, err
		}
		if doc == "" {
			return nil, fmt.Errorf("%s: no description in the schema (document the field in api/v1alpha1)", f.path)
		}
		x := f.xDescriptors
		if isSpec && len(schema.Enum) > 0 {
			// A select lists the enum's values, so the console form offers exactly what the API accepts.
			x = append(enumSelect(schema.Enum), x...)
		}
		if len(x) == 0 {
			return nil, fmt.Errorf("%s: no x-descriptors and no enum to make a select of", f.path)
		}
		out = append(out, descriptor{
			Path:         f.path,
			DisplayName:  cmp.Or(names[f.path], displayName(f.path)),
			Description:  summary(doc),
			XDescriptors: x,
		})
	}
	return out, nil
}

// lookup finds the schema of a dotted path below root, and its description; a reference's "name" (an
// undocumented field of LocalObjectReference and the like) is described by the reference. A path through an
// array is not supported because no descriptor needs one.
func lookup(root apiextensionsv1.JSONSchemaProps, path string) (apiextensionsv1.JSONSchemaProps, string, error) {
	schema := root
	var parentDoc string
	for _, name := range strings.Split(path, ".") {
		child, ok := schema.Properties[name]
		if !ok {
			return apiextensionsv1.JSONSchemaProps{}, "", fmt.Errorf("%s: the schema has no field %q", path, name)
		}
		parentDoc = schema.Description
		schema = child
	}
	if schema.Description == "" && strings.HasSuffix(path, ".name") {
		return schema, parentDoc, nil
	}
	return schema, schema.Description, nil
}

func enumSelect(values []apiextensionsv1.JSON) []string {
	out := make([]string, 0, len(values))
	for _, v := range values {
		out = append(out, xSelectPrefix+strings.Trim(string(v.Raw), `"`))
	}
	return out
}

// displayName turns the last element of a path into words: "storageClassName" -> "Storage Class Name".
// Acronyms stay together: "clusterID" -> "Cluster ID". A reference's "name" is shown as the reference:
// "credentialsSecret.name" -> "Credentials Secret".
func displayName(path string) string {
	elements := strings.Split(path, ".")
	name := elements[len(elements)-1]
	if name == "name" && len(elements) > 1 {
		name = elements[len(elements)-2]
	}
	runes := []rune(name)
	var b strings.Builder
	for i, r := range runes {
		if i == 0 {
			b.WriteRune(unicode.ToUpper(r))
			continue
		}
		prevLower := unicode.IsLower(runes[i-1]) || unicode.IsDigit(runes[i-1])
		nextLower := i+1 < len(runes) && unicode.IsLower(runes[i+1])
		if unicode.IsUpper(r) && (prevLower || (unicode.IsUpper(runes[i-1]) && nextLower)) {
			b.WriteByte(' ')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// summary is the first sentence of a field's documentation: the console shows descriptions as tooltips, and
// `kubectl explain` has the rest.
func summary(description string) string {
	paragraph, _, _ := strings.Cut(description, "\n\n")
	text := strings.Join(strings.Fields(paragraph), " ")
	for i := 0; i+1 < len(text); i++ {
		// A period that ends a sentence is followed by a space and a capital; "e.g. x" or "3.6.16" are not.
		if text[i] == '.' && text[i+1] == ' ' && i+2 < len(text) && unicode.IsUpper(rune(text[i+2])) {
			return text[:i+1]
		}
	}
	return text
}
