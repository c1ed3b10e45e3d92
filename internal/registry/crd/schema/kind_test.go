package schema_test

import (
	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/crd/schema"
)

// The registry checks custom resources through this package.
var _ registry.Schema = (*schema.Schema)(nil)
