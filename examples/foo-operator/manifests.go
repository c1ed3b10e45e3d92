// Package fooop holds the static manifests of the foo-operator example so
// that tests (and the operator binary) can install them without reading
// files relative to the working directory.
package fooop

import _ "embed"

// CRD is the YAML of the foos.webapp.my.domain CustomResourceDefinition
// (config/crd.yaml).
//
//go:embed config/crd.yaml
var CRD []byte
