package backup

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// AzureConfig addresses a container of Azure Blob Storage.
type AzureConfig struct {
	Account, Container string
	// Endpoint is the account's Blob service URL (an emulator's, a private endpoint's); empty:
	// https://<account>.blob.core.windows.net. Azurite puts the account in the path: http://host:port/<account>.
	Endpoint string
	// AccountKey is the account's shared key, SASToken a shared access signature; both empty: the Azure SDK's
	// default chain (workload identity, a managed identity). AccountKey wins over SASToken.
	AccountKey, SASToken string
	// Transport sends the requests of the blob client and of the default chain's token requests; nil: the SDK's
	// own HTTP client. Tests give one that reaches their server.
	Transport policy.Transporter
}

// AzureContainer is a container of Azure Blob Storage: Store addresses one blob, Dir a prefix of blobs.
type AzureContainer struct {
	cfg    AzureConfig
	client *container.Client
}

// NewAzureContainer returns a client of cfg's container. An error means the destination cannot be used at all
// (ErrDestination): a malformed endpoint or key, credentials for plain HTTP, or no default chain to build.
// Neither the key nor the SAS token is ever part of an error.
func NewAzureContainer(cfg AzureConfig) (*AzureContainer, error) {
	c, err := azureClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: azure client for %s: %w", ErrDestination, azureLocation(cfg, ""), err)
	}
	return &AzureContainer{cfg: cfg, client: c}, nil
}

func azureClient(cfg AzureConfig) (*container.Client, error) {
	endpoint := cfg.Endpoint
	if endpoint == "" {
		endpoint = "https://" + cfg.Account + ".blob.core.windows.net"
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
		return nil, fmt.Errorf("endpoint %q: want an http:// or https:// URL without query", cfg.Endpoint)
	}
	containerURL := strings.TrimRight(endpoint, "/") + "/" + cfg.Container
	opts := &container.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: cfg.Transport}}
	keyed := cfg.AccountKey != "" || cfg.SASToken != ""
	if u.Scheme == "http" && keyed && cfg.Account != etcdv1alpha1.AzureDevelopmentAccount {
		// A key or signature over plain HTTP would travel readable; admission refuses the same spec.
		return nil, fmt.Errorf("credentials are never sent to an http:// endpoint (only those of Azurite's %s)", etcdv1alpha1.AzureDevelopmentAccount)
	}
	switch {
	case cfg.AccountKey != "":
		cred, err := container.NewSharedKeyCredential(cfg.Account, cfg.AccountKey)
		if err != nil {
			// The SDK's message says only that the key is not base64, never the key.
			return nil, fmt.Errorf("account key: %w", err)
		}
		return container.NewClientWithSharedKeyCredential(containerURL, cred, opts)
	case cfg.SASToken != "":
		return container.NewClientWithNoCredential(containerURL+"?"+strings.TrimPrefix(cfg.SASToken, "?"), opts)
	case u.Scheme == "http":
		// An emulator without credentials: a bearer token over plain HTTP would be readable (and the SDK
		// refuses to send one).
		return container.NewClientWithNoCredential(containerURL, opts)
	}
	cred, err := azidentity.NewDefaultAzureCredential(&azidentity.DefaultAzureCredentialOptions{
		ClientOptions: azcore.ClientOptions{Transport: cfg.Transport}})
	if err != nil {
		return nil, fmt.Errorf("default credential chain: %w", err)
	}
	return container.NewClient(containerURL, cred, opts)
}

// azureLocation is the azure://<account>/<container>/<key> form status.location uses.
func azureLocation(cfg AzureConfig, key string) string {
	return "azure://" + cfg.Account + "/" + cfg.Container + "/" + key
}

// Store addresses the blob key of the container.
func (c *AzureContainer) Store(key string) *AzureStore { return &AzureStore{c: c, key: key} }

// AzureStore is one block blob of a container.
type AzureStore struct {
	c   *AzureContainer
	key string
}

// Location implements Store.
func (s *AzureStore) Location() string { return azureLocation(s.c.cfg, s.key) }

func (s *AzureStore) blob() *blockblob.Client { return s.c.client.NewBlockBlobClient(s.key) }

// Put streams r into blocks of PartSize, staged one after the other, and commits the block list only after r
// returned io.EOF: staged blocks are invisible until a commit, so a reader error (ErrChecksumMismatch at the
// very end included) leaves no blob (Azure discards uncommitted blocks after a week).
//
// The commit carries If-None-Match: *, so Azure commits it only if no blob has the key by then: of two writers
// racing for one key exactly one succeeds and the other gets ErrExists. Their staged blocks do not mix: every
// upload's block IDs start with a random nonce of its own (uncommitted blocks of one blob share a namespace, and
// all of a blob's block IDs must have the same length, which the fixed format keeps). The existence check before
// the upload only saves sending a snapshot that would be refused, and finds an unusable destination (container,
// credentials) before a byte is read.
func (s *AzureStore) Put(ctx context.Context, r io.Reader) (string, error) {
	if _, err := s.blob().GetProperties(ctx, nil); err == nil {
		return "", fmt.Errorf("%s: %w", s.Location(), ErrExists)
	} else if !bloberror.HasCode(err, bloberror.BlobNotFound) {
		return "", fmt.Errorf("%w: check %s: %w", ErrDestination, s.Location(), err)
	}
	var nonce [8]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return "", fmt.Errorf("upload %s: %w", s.Location(), err)
	}
	var ids []string
	buf := make([]byte, PartSize)
	for done := false; !done; {
		n, rerr := fill(r, buf)
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			// r's error as it is (ErrChecksumMismatch included); nothing is committed.
			return "", fmt.Errorf("upload %s: %w", s.Location(), rerr)
		}
		done = rerr != nil // io.EOF: r is done and verified
		if n > 0 {
			id := base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "%s-%08d", hex.EncodeToString(nonce[:]), len(ids)))
			if _, err := s.blob().StageBlock(ctx, id, streaming.NopCloser(bytes.NewReader(buf[:n])), nil); err != nil {
				return "", fmt.Errorf("upload %s: %w", s.Location(), err)
			}
			ids = append(ids, id)
		}
	}
	_, err := s.blob().CommitBlockList(ctx, ids, &blockblob.CommitBlockListOptions{
		HTTPHeaders: &blob.HTTPHeaders{BlobContentType: to.Ptr("application/octet-stream")},
		Metadata:    map[string]*string{"steward_snapshot": to.Ptr("etcd")},
		AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{
			IfNoneMatch: to.Ptr(azcore.ETagAny)}},
	})
	if bloberror.HasCode(err, bloberror.BlobAlreadyExists, bloberror.ConditionNotMet) {
		return "", fmt.Errorf("%s: another writer committed a blob under this key first: %w", s.Location(), ErrExists)
	}
	if err != nil {
		return "", fmt.Errorf("upload %s: %w", s.Location(), err)
	}
	return s.Location(), nil
}

// Delete implements Store: the blob and any snapshots of it (Azure refuses to delete a blob that has some
// otherwise). A missing blob counts as deleted.
func (s *AzureStore) Delete(ctx context.Context) error {
	return azureDelete(ctx, s.blob(), s.Location())
}

func azureDelete(ctx context.Context, b *blockblob.Client, location string) error {
	_, err := b.Delete(ctx, &blob.DeleteOptions{DeleteSnapshots: to.Ptr(blob.DeleteSnapshotsOptionTypeInclude)})
	if err != nil && !bloberror.HasCode(err, bloberror.BlobNotFound) {
		return fmt.Errorf("delete %s: %w", location, err)
	}
	return nil
}

// Open implements Store. The blob is streamed, and a broken connection resumes where it broke (the SDK's retry
// reader, pinned to the blob's ETag). A missing blob or refused credentials show here, before any byte is read.
func (s *AzureStore) Open(ctx context.Context) (io.ReadCloser, error) {
	resp, err := s.blob().DownloadStream(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", s.Location(), err)
	}
	return resp.NewRetryReader(ctx, &blob.RetryReaderOptions{MaxRetries: 3}), nil
}

// AzureDir is a blob name prefix in a container: blobs are <prefix>/<name>.
type AzureDir struct {
	c      *AzureContainer
	prefix string
}

// Dir is the prefix of the container.
func (c *AzureContainer) Dir(prefix string) AzureDir {
	return AzureDir{c: c, prefix: strings.Trim(prefix, "/")}
}

// Location implements ObjectDir.
func (d AzureDir) Location() string { return azureLocation(d.c.cfg, d.prefix) }

func (d AzureDir) blob(name string) (*blockblob.Client, error) {
	if name == "" || strings.Contains(name, "/") {
		return nil, fmt.Errorf("blob %q in %s: not a plain name", name, d.Location())
	}
	return d.c.client.NewBlockBlobClient(path.Join(d.prefix, name)), nil
}

// List implements ObjectDir.
func (d AzureDir) List(ctx context.Context) ([]string, error) {
	names, _, err := d.listing(ctx)
	return names, err
}

// Dirs implements ObjectDir.
func (d AzureDir) Dirs(ctx context.Context) ([]string, error) {
	_, dirs, err := d.listing(ctx)
	return dirs, err
}

// listing is the blobs directly under the prefix and the deeper prefixes, from the hierarchy listing.
func (d AzureDir) listing(ctx context.Context) (names, dirs []string, err error) {
	pager := d.c.client.NewListBlobsHierarchyPager("/", &container.ListBlobsHierarchyOptions{Prefix: to.Ptr(d.prefix + "/")})
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("list %s: %w", d.Location(), err)
		}
		for _, item := range page.Segment.BlobItems {
			if item.Name != nil {
				names, dirs = sortEntry(strings.TrimPrefix(*item.Name, d.prefix+"/"), names, dirs)
			}
		}
		for _, p := range page.Segment.BlobPrefixes {
			if p.Name != nil {
				names, dirs = sortEntry(strings.TrimPrefix(*p.Name, d.prefix+"/"), names, dirs)
			}
		}
	}
	return names, dirs, nil
}

// Put implements ObjectDir: a single Put Blob request, which Azure makes visible whole or not at all.
func (d AzureDir) Put(ctx context.Context, name string, b []byte) error {
	bb, err := d.blob(name)
	if err != nil {
		return err
	}
	_, err = bb.Upload(ctx, streaming.NopCloser(bytes.NewReader(b)), &blockblob.UploadOptions{
		HTTPHeaders: &blob.HTTPHeaders{BlobContentType: to.Ptr("application/x-ndjson")}})
	if err != nil {
		return fmt.Errorf("upload %s/%s: %w", d.Location(), name, err)
	}
	return nil
}

// Get implements ObjectDir.
func (d AzureDir) Get(ctx context.Context, name string) ([]byte, error) {
	bb, err := d.blob(name)
	if err != nil {
		return nil, err
	}
	resp, err := bb.DownloadStream(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("get %s/%s: %w", d.Location(), name, err)
	}
	r := resp.NewRetryReader(ctx, &blob.RetryReaderOptions{MaxRetries: 3})
	defer func() { _ = r.Close() }()
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("get %s/%s: %w", d.Location(), name, err)
	}
	return b, nil
}

// Delete implements ObjectDir.
func (d AzureDir) Delete(ctx context.Context, name string) error {
	bb, err := d.blob(name)
	if err != nil {
		return err
	}
	return azureDelete(ctx, bb, d.Location()+"/"+name)
}
