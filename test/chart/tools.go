//go:build tools

// This file pins the helm command's version in go.mod, so that `make helm` builds the same Helm the tests link.
package chart

import _ "helm.sh/helm/v3/cmd/helm"
