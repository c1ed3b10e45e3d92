package widgetop

import _ "embed"

// CRD is the YAML of the widgets.example.kplane.dev
// CustomResourceDefinition (config/crd/example.kplane.dev_widgets.yaml),
// as controller-gen wrote it.
//
//go:embed config/crd/example.kplane.dev_widgets.yaml
var CRD []byte
