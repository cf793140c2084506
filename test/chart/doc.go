// Package chart tests the Helm chart charts/steward with Helm's own packages (the ones `helm lint` and
// `helm template` run): the chart lints clean, renders what the golden files hold, refuses bad values through its
// schema, and carries the same RBAC rules, CRDs, version and image as the rest of the tree (config/ and
// internal/version). It is its own module so that Helm's dependencies stay out of the operator's go.mod; it
// reads the tree's files, never imports its packages.
package chart
