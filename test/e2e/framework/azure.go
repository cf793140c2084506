package framework

import (
	"context"
	"io"
	"sort"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/backup"
)

// AzureSecret is the credentials Secret CreateAzureSecret makes: the development account's shared key.
const AzureSecret = "azurite-key" //nolint:gosec // the name of a Secret, not a credential

// CreateAzureSecret creates Secret ns/AzureSecret with the shared key of the test bed's Azurite account. The key
// is published with Azurite, which is why admission lets it travel over plain HTTP.
func CreateAzureSecret(t *testing.T, ns string) {
	t.Helper()
	if err := K8s.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: AzureSecret},
		Data: map[string][]byte{etcdv1alpha1.AzureAccountKeyKey: []byte(Bed.Azure.Key)}}); err != nil {
		t.Fatal(err)
	}
}

// AzureDestination is key in the test bed's Azurite container, reached with the key in Secret AzureSecret.
func AzureDestination(key string) etcdv1alpha1.BackupDestination {
	return etcdv1alpha1.BackupDestination{Azure: &etcdv1alpha1.AzureDestination{Endpoint: Bed.Azure.Endpoint,
		StorageAccount: Bed.Azure.Account, Container: Bed.Azure.Container, Key: key,
		CredentialsSecret: &etcdv1alpha1.SecretReference{Name: AzureSecret}}}
}

func azureConfig() backup.AzureConfig {
	return backup.AzureConfig{Account: Bed.Azure.Account, Container: Bed.Azure.Container, Endpoint: Bed.Azure.Endpoint, AccountKey: Bed.Azure.Key}
}

// AzureKeys lists the blob names under prefix (all depths), sorted.
func AzureKeys(t *testing.T, prefix string) []string {
	t.Helper()
	cred, err := container.NewSharedKeyCredential(Bed.Azure.Account, Bed.Azure.Key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := container.NewClientWithSharedKeyCredential(Bed.Azure.Endpoint+"/"+Bed.Azure.Container, cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	pager := c.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: to.Ptr(prefix)})
	for pager.More() {
		page, err := pager.NextPage(context.Background())
		if err != nil {
			t.Fatalf("list %s: %v", prefix, err)
		}
		for _, b := range page.Segment.BlobItems {
			names = append(names, *b.Name)
		}
	}
	sort.Strings(names)
	return names
}

// AzureObject reads a blob of the test bed's container whole.
func AzureObject(t *testing.T, key string) []byte {
	t.Helper()
	c, err := backup.NewAzureContainer(azureConfig())
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Store(strings.TrimPrefix(key, "/")).Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return b
}
