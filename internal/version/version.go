// Package version is Steward's version, the one place it is written. The operator prints it (--version, the
// startup log), the image is tagged with it, and the install manifests (config/manager, charts/steward,
// bundle/) are generated from it and checked fresh by `make verify`.
package version

import (
	"runtime/debug"
	"strings"
)

// Version is this tree's release, semver without a leading "v" (Helm charts and OLM bundles want it so).
const Version = "0.1.0"

// Repository is where Steward's image is published. One image holds the operator (its entrypoint) and
// steward-agent, the program of backup, restore and verify Jobs, so the two never run different releases.
const Repository = "ghcr.io/steward-dev/steward"

// Tag is the image tag of this release.
const Tag = "v" + Version

// Image is the image of this release: the operator's, and the default of --agent-image.
const Image = Repository + ":" + Tag

// Describe is the version as the operator prints it: the release, plus the commit it was built from and
// whether the tree had changes, when the binary records them (go build does in a git checkout).
func Describe() string {
	s := Tag
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return s
	}
	var revision, modified string
	for _, kv := range info.Settings {
		switch kv.Key {
		case "vcs.revision":
			revision = kv.Value
		case "vcs.modified":
			modified = kv.Value
		}
	}
	if revision != "" {
		s += " (commit " + revision[:min(12, len(revision))]
		if modified == "true" {
			s += ", modified"
		}
		s += ")"
	}
	return s + ", " + info.GoVersion
}

// IsRelease reports whether image is tagged with this release, from any repository (a mirror of Steward's own
// image): then its steward-agent knows everything this operator asks of it. An image by digest or with another
// tag may hold an older agent.
func IsRelease(image string) bool {
	if strings.Contains(image, "@") {
		return false
	}
	slash := strings.LastIndex(image, "/")
	colon := strings.LastIndex(image, ":")
	return colon > slash && image[colon+1:] == Tag
}
