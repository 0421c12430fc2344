// cert-manager's ACME HTTP-01 solver: the process of the pods that cert-manager's controller
// creates for each HTTP-01 challenge (behind a Service and an Ingress for the challenge's path),
// answering the challenge's token with its key. Upstream's cmd/acmesolver is a nested module that
// the module proxy does not serve; this is a thin main over its public package
// pkg/issuer/acme/http/solver, with the same flags the controller passes (pkg/issuer/acme/http/pod.go).
// Built by hack/binaries next to ../main.go and packaged as an image by hack/images.ts.
package main

import (
	"context"
	"errors"
	"flag"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/cert-manager/cert-manager/pkg/issuer/acme/http/solver"
)

func main() {
	s := &solver.HTTP01Solver{}
	flag.IntVar(&s.ListenPort, "listen-port", 8089, "the port to listen on")
	flag.StringVar(&s.Domain, "domain", "", "the domain name of the challenge")
	flag.StringVar(&s.Token, "token", "", "the challenge's token")
	flag.StringVar(&s.Key, "key", "", "the challenge's key")
	klog.InitFlags(nil)
	flag.Parse()
	log := klog.Background().WithName("acmesolver")
	if s.Domain == "" || s.Token == "" || s.Key == "" {
		log.Error(nil, "--domain, --token and --key are required")
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- s.Listen(log) }()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(err, "listening")
			os.Exit(1)
		}
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(shutdown); err != nil {
			log.Error(err, "shutting down")
		}
	}
}
