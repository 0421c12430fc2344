//go:build tools

// The upstream mains hack/binaries builds from this module, held in its build list (go mod tidy).
package tools

import (
	_ "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router"
	_ "github.com/coredns/coredns"
	_ "github.com/traefik/traefik/v3/cmd/traefik"
	_ "helm.sh/helm/v3/cmd/helm"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "sigs.k8s.io/kwok/cmd/kwok"
	_ "sigs.k8s.io/metrics-server/cmd/metrics-server"
)
