//go:build tools

// Keeps kube-router's main in this module's build list (go mod tidy), so that hack/binaries can
// build github.com/cloudnativelabs/kube-router/v2/cmd/kube-router from here.
package tools

import _ "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router"
