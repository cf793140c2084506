package testbed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
)

// AzuriteVersion is the version of the Azure Blob Storage emulator the test bed runs
// (third_party/azurite/package.json, every dependency pinned by its package-lock.json).
const AzuriteVersion = "3.37.0"

// Azurite's well-known development account: its name and shared key are published with the emulator.
const (
	AzuriteAccount = "devstoreaccount1"
	AzuriteKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==" //nolint:gosec // Azurite's published development key
)

// AzureContainer is the container the test bed's Azure emulator has from the start.
const AzureContainer = "steward-backups"

// AzureServer is the test bed's Azure Blob Storage emulator: Azurite's blob service keeping its data in the
// state dir, over plain HTTP on the node IP, so that Pods (backup Jobs) and the test process both reach it.
type AzureServer struct {
	// Endpoint is the account's Blob service URL (http://host:port/devstoreaccount1: Azurite puts the account
	// in the path), as an AzureDestination's endpoint takes it.
	Endpoint string
	// Account and Key are the development account's name and shared key.
	Account, Key string
	// Container exists from the start.
	Container string
	// Root is the directory behind the emulator.
	Root string
}

// ensureAzurite returns the directory Azurite is installed in, installing it first with `npm ci` from
// third_party/azurite unless an identical install (same package.json and package-lock.json) is cached.
func (b *builder) ensureAzurite(ctx context.Context) (string, error) {
	modDir := filepath.Join(b.opts.ModuleRoot, "internal", "testbed", "third_party", "azurite")
	sum, err := hashTree(modDir)
	if err != nil {
		return "", fmt.Errorf("hash %s: %w", modDir, err)
	}
	key := fmt.Sprintf("azurite-%s-%s", AzuriteVersion, sum[:12])
	return b.cached(key, fmt.Sprintf("installing azurite %s from npm", AzuriteVersion), "about half a minute", func(tmp string) error {
		for _, f := range []string{"package.json", "package-lock.json"} {
			data, err := os.ReadFile(filepath.Join(modDir, f))
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(tmp, f), data, 0o644); err != nil {
				return err
			}
		}
		// npm ci installs exactly the lock file's versions. Azurite asks for Node 22 but runs its blob service on
		// the Node 20 Debian ships, so the engine check stays a warning.
		cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = tmp
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("npm ci azurite %s: %w\n%s", AzuriteVersion, err, out)
		}
		return nil
	})
}

// AzuriteBlobCommand is the blob service's program in an Azurite install (ensureAzurite's directory).
func AzuriteBlobCommand(dir string) string {
	return filepath.Join(dir, "node_modules", "azurite", "dist", "src", "blob", "main.js")
}

// AzuriteArgs are the arguments of Azurite's blob service on host:port, keeping its data in dir: --loose accepts
// headers it does not implement, --skipApiVersionCheck the SDK's newer API version.
func AzuriteArgs(dir, host string, port int) []string {
	return []string{"--blobHost", host, "--blobPort", fmt.Sprint(port), "--location", dir, "--loose", "--skipApiVersionCheck",
		"--disableProductStyleUrl", "--silent"}
}

// CreateAzureContainer creates name in s's account (an existing one is fine).
func CreateAzureContainer(ctx context.Context, endpoint, name string) error {
	cred, err := container.NewSharedKeyCredential(AzuriteAccount, AzuriteKey)
	if err != nil {
		return err
	}
	c, err := container.NewClientWithSharedKeyCredential(strings.TrimRight(endpoint, "/")+"/"+name, cred, nil)
	if err != nil {
		return err
	}
	if _, err := c.Create(ctx, nil); err != nil && !bloberror.HasCode(err, bloberror.ContainerAlreadyExists) {
		return fmt.Errorf("create container %s: %w", name, err)
	}
	return nil
}

// startAzure starts Azurite's blob service on a free port of the node IP and creates its container.
func (c *Cluster) startAzure(ctx context.Context) error {
	if c.azureDir == "" {
		return errors.New("azurite is not installed")
	}
	port, err := freePort(NodeIP)
	if err != nil {
		return err
	}
	s := &AzureServer{Endpoint: fmt.Sprintf("http://%s:%d/%s", NodeIP, port, AzuriteAccount), Account: AzuriteAccount, Key: AzuriteKey,
		Container: AzureContainer, Root: c.state("azure")}
	if err := os.MkdirAll(s.Root, 0o755); err != nil {
		return err
	}
	node, err := exec.LookPath("node")
	if err == nil {
		// The PID file's program must be the one /proc/<pid>/exe names, for Stop to recognise the process.
		node, err = filepath.EvalSymlinks(node)
	}
	if err != nil {
		return err
	}
	p, err := c.spawnEnv("azurite", nil, node, append([]string{AzuriteBlobCommand(c.azureDir)}, AzuriteArgs(s.Root, NodeIP, port)...)...)
	if err != nil {
		return err
	}
	create := func(ctx context.Context) error { return CreateAzureContainer(ctx, s.Endpoint, s.Container) }
	if err := c.waitFor(ctx, p, "azurite serves "+s.Endpoint+" with container "+s.Container, 30*time.Second, create); err != nil {
		return err
	}
	c.Azure = s
	return nil
}
