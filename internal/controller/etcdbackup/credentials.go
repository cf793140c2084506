package etcdbackup

import (
	"strings"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// secretKeys are the keys a user's Secret must hold to serve: every one of keys, or with oneOf any one of them.
type secretKeys struct {
	keys  []string
	oneOf bool
}

// missing says what data lacks, as the end of a message ("has no key ..."); empty when it has what is needed.
func (k secretKeys) missing(data map[string][]byte) string {
	for _, key := range k.keys {
		has := len(data[key]) > 0
		if k.oneOf && has {
			return ""
		}
		if !k.oneOf && !has {
			return "has no key " + key
		}
	}
	if k.oneOf {
		return "has neither key " + strings.Join(k.keys, " nor key ")
	}
	return ""
}

// destinationCredentials is how the Jobs reach bucket destination d: the credentials Secret's name and the keys
// they read from it, or (secret "") ambient credentials, their own identity as serviceAccount, which the operator
// has nothing to check of and cannot use itself.
func destinationCredentials(d etcdv1alpha1.BackupDestination) (secret string, need secretKeys, serviceAccount string) {
	var ref *etcdv1alpha1.SecretReference
	switch {
	case d.GCS != nil:
		ref, serviceAccount = d.GCS.CredentialsSecret, d.GCS.ServiceAccountName
		need = secretKeys{keys: []string{etcdv1alpha1.GCSServiceAccountKey}}
	case d.Azure != nil:
		ref, serviceAccount = d.Azure.CredentialsSecret, d.Azure.ServiceAccountName
		need = secretKeys{keys: []string{etcdv1alpha1.AzureAccountKeyKey, etcdv1alpha1.AzureSASTokenKey}, oneOf: true}
	case d.S3 != nil:
		ref, serviceAccount = d.S3.CredentialsSecret, d.S3.ServiceAccountName
		need = secretKeys{keys: []string{etcdv1alpha1.S3AccessKeyIDKey, etcdv1alpha1.S3SecretAccessKeyKey}}
	}
	if ref == nil {
		return "", secretKeys{}, serviceAccount
	}
	return ref.Name, need, serviceAccount
}
