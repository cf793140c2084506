// Package framework is the vocabulary of Steward's end-to-end tests (test/e2e): the test bed and its clients
// (Bed, K8s), a namespace of a test's own (NewNamespace) and an operator watching only it (StartOperator), and
// the helpers the tests build their scenarios from, one file per theme. The suite itself (TestMain, parallel and
// serial, the gate that admits the longest tests first and its expected durations) stays in test/e2e.
package framework
