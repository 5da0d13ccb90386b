package upgrade

import (
	"cmp"
	"fmt"
	"log/slog"
	"time"

	"helm.sh/helm/v3/pkg/action"
	helmcli "helm.sh/helm/v3/pkg/cli"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// ClusterOptions say which cluster and release store NewConfiguration uses.
type ClusterOptions struct {
	// Namespace holds the releases ("" takes the kubeconfig's, or the pod's
	// in-cluster namespace).
	Namespace string
	// Kubeconfig is read instead of KUBECONFIG, ~/.kube/config or the
	// in-cluster service account.
	Kubeconfig string
	// StorageDriver is Helm's release store: secret (default), configmap, memory or sql.
	StorageDriver string
	// RequestTimeout bounds every Kubernetes API request (zero or less:
	// DefaultRequestTimeout, as for Options).
	RequestTimeout time.Duration
	// Logger receives Helm's debug lines (default: discard).
	Logger *slog.Logger
}

// NewConfiguration is the Helm action configuration for releases in
// o.Namespace, and the namespace it resolved. Nothing is contacted until it
// is used.
func NewConfiguration(o ClusterOptions) (*action.Configuration, string, error) {
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	o.Logger = cmp.Or(o.Logger, slog.New(slog.DiscardHandler))
	namespace := o.Namespace
	settings := helmcli.New()
	if o.Kubeconfig != "" {
		settings.KubeConfig = o.Kubeconfig
	}
	if namespace != "" {
		settings.SetNamespace(namespace)
	}
	getter := settings.RESTClientGetter()
	if cf, ok := getter.(*genericclioptions.ConfigFlags); ok {
		// client-go has no request timeout by default: a hung API server
		// would hang the tick.
		t := o.RequestTimeout.String()
		cf.Timeout = &t
	}
	namespace = settings.Namespace()
	cfg := new(action.Configuration)
	log := func(format string, v ...any) { o.Logger.Debug("helm: " + fmt.Sprintf(format, v...)) }
	if err := cfg.Init(getter, namespace, o.StorageDriver, log); err != nil {
		return nil, namespace, fmt.Errorf("setting up Helm for namespace %q: %w", namespace, err)
	}
	return cfg, namespace, nil
}
