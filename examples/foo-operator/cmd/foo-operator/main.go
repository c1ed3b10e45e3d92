// Command foo-operator runs FooReconciler against a Kubernetes-compatible
// API server (such as kplane) and prints its counters every five seconds.
//
// Install the CRD first (examples/foo-operator/config/crd.yaml), then e.g.
//
//	go run ./examples/foo-operator/cmd/foo-operator --kubeconfig=$HOME/.kube/config --mode=two-updates -v=1
//
// and create a Foo object to watch the modes behave as described in the
// controller package documentation (--mode=merge-patch makes the same two
// writes per pass as two-updates, without a single 409).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	webappv1 "github.com/kplane-dev/kplane/examples/foo-operator/api/v1"
	"github.com/kplane-dev/kplane/examples/foo-operator/controller"
)

type options struct {
	kubeconfig  string
	mode        string
	namespace   string
	leaderElect bool
	verbosity   int
	interval    time.Duration
}

func parseFlags(args []string) (options, error) {
	var o options
	// A private FlagSet: controller-runtime already registers "kubeconfig"
	// on flag.CommandLine.
	fs := flag.NewFlagSet("foo-operator", flag.ContinueOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"),
		"path to a kubeconfig file (default $KUBECONFIG; empty means in-cluster or ~/.kube/config)")
	fs.StringVar(&o.mode, "mode", string(controller.ModeRetry),
		fmt.Sprintf("reconcile mode, one of %v (merge-patch: two-updates with merge patches instead of Updates)", controller.Modes()))
	fs.StringVar(&o.namespace, "namespace", "", "if set, only watch and cache Foo objects in this namespace")
	fs.BoolVar(&o.leaderElect, "leader-elect", false,
		"use leader election (Lease \"foo-operator\" in namespace \"default\")")
	fs.IntVar(&o.verbosity, "v", 0, "log verbosity; 1 logs every update with its resourceVersion")
	fs.DurationVar(&o.interval, "report-interval", 5*time.Second, "how often to print the counters")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if o.interval <= 0 {
		return o, errors.New("--report-interval must be positive")
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{
		Level: slog.Level(-o.verbosity),
	}))
	ctrl.SetLogger(logr.FromSlogHandler(logger.Handler()))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if err := run(ctx, o, logger); err != nil {
		logger.Error("foo-operator failed", "error", err)
		os.Exit(1)
	}
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	return ctrl.GetConfig()
}

func run(ctx context.Context, o options, logger *slog.Logger) error {
	mode, err := controller.ParseMode(o.mode)
	if err != nil {
		return err
	}

	cfg, err := restConfig(o.kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(webappv1.AddToScheme(scheme))

	mgrOpts := ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "foo-operator",
		LeaderElectionNamespace: "default",
	}
	if o.namespace != "" {
		mgrOpts.Cache = cache.Options{
			DefaultNamespaces: map[string]cache.Config{o.namespace: {}},
		}
	}

	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}

	counters := &controller.Counters{}
	r := &controller.FooReconciler{
		Client:   mgr.GetClient(),
		Mode:     mode,
		Counters: counters,
		Log:      ctrl.Log.WithName("foo-reconciler"),
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up controller: %w", err)
	}

	go func() {
		t := time.NewTicker(o.interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				logger.Info("counters", "mode", mode, "counters", counters.Snapshot())
			}
		}
	}()

	logger.Info("starting foo-operator", "mode", mode, "namespace", o.namespace, "leaderElect", o.leaderElect)
	err = mgr.Start(ctx)
	logger.Info("stopped", "mode", mode, "counters", counters.Snapshot())
	return err
}
