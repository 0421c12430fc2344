// A thin main for cert-manager's controller over its public pkg/controller API, built by
// hack/binaries at the pinned CERT_MANAGER_VERSION (upstream's cmd/controller is an unpublished
// nested module, which the module proxy answers with 404 or 403). It runs the
// Certificate controllers, the CertificateRequest approver, the CA and selfSigned issuers (a
// selfSigned -> CA -> CA ClusterIssuer chain and leaf Certificates) and the ACME issuer with its
// Order and Challenge controllers (HTTP-01 through an ingress: solver pods run the image named by
// --acme-http01-solver-image, built from ./acmesolver). Linking the ACME issuer links its DNS-01
// providers too (and their cloud SDKs): the binary is larger, DNS-01 is not used here.
package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"

	"github.com/cert-manager/cert-manager/pkg/controller"
	logf "github.com/cert-manager/cert-manager/pkg/logs"

	_ "github.com/cert-manager/cert-manager/pkg/controller/acmechallenges"
	_ "github.com/cert-manager/cert-manager/pkg/controller/acmeorders"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/acme"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/acme"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "path to a kubeconfig")
	clusterNS := flag.String("cluster-resource-namespace", "cert-manager", "namespace of the Secrets that ClusterIssuers reference")
	ownerRef := flag.Bool("enable-certificate-owner-ref", false, "make each Certificate the owner of its Secret")
	solverImage := flag.String("acme-http01-solver-image", "", "image of the ACME HTTP-01 solver pods")
	solverNameservers := flag.String("acme-http01-solver-nameservers", "", "comma-separated ip:port of the DNS servers of the HTTP-01 self-check (default: the host's)")
	solverNonRoot := flag.Bool("acme-http01-solver-run-as-non-root", true, "run the solver pods with runAsNonRoot")
	klog.InitFlags(nil)
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = logf.NewContext(ctx, klog.Background(), "cert-manager")
	log := logf.FromContext(ctx)

	opts := controller.ContextOptions{
		Kubeconfig:         *kubeconfig,
		KubernetesAPIQPS:   50,
		KubernetesAPIBurst: 100,
		IssuerOptions:      controller.IssuerOptions{ClusterResourceNamespace: *clusterNS},
		CertificateOptions: controller.CertificateOptions{
			EnableOwnerRef:                           *ownerRef,
			CertificateRequestMinimumBackoffDuration: 10 * time.Second,
			CertificateRequestMaximumBackoffDuration: 5 * time.Minute,
		},
		SchedulerOptions: controller.SchedulerOptions{MaxConcurrentChallenges: 60},
		// upstream's defaults for the solver pods' resources
		ACMEOptions: controller.ACMEOptions{
			HTTP01SolverImage:                 *solverImage,
			HTTP01SolverResourceRequestCPU:    resource.MustParse("10m"),
			HTTP01SolverResourceRequestMemory: resource.MustParse("64Mi"),
			HTTP01SolverResourceLimitsCPU:     resource.MustParse("100m"),
			HTTP01SolverResourceLimitsMemory:  resource.MustParse("64Mi"),
			ACMEHTTP01SolverRunAsNonRoot:      *solverNonRoot,
			HTTP01SolverNameservers:           splitList(*solverNameservers),
			DNS01CheckRetryPeriod:             10 * time.Second,
		},
	}
	factory, err := controller.NewContextFactory(ctx, opts)
	if err != nil {
		log.Error(err, "building the controller context")
		os.Exit(1)
	}

	names := make([]string, 0, len(controller.Known()))
	for n := range controller.Known() {
		names = append(names, n)
	}
	sort.Strings(names)
	var wg sync.WaitGroup
	for _, n := range names {
		iface, err := controller.Known()[n](factory)
		if err != nil {
			log.Error(err, "constructing a controller", "controller", n)
			os.Exit(1)
		}
		log.Info("starting controller", "controller", n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := iface.Run(2, ctx); err != nil {
				log.Error(err, "controller stopped", "controller", n)
				os.Exit(1)
			}
		}()
	}

	// The constructors registered their informers on the shared factories: start them now.
	shared, err := factory.Build("informers")
	if err != nil {
		log.Error(err, "building the informers' context")
		os.Exit(1)
	}
	shared.SharedInformerFactory.Start(ctx.Done())
	shared.KubeSharedInformerFactory.Start(ctx.Done())
	shared.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
	wg.Wait()
	log.Info("control loops exited")
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
