package upgrade

import (
	"fmt"
	"log/slog"
	"time"

	"helm.sh/helm/v3/pkg/action"
	helmcli "helm.sh/helm/v3/pkg/cli"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

type configOptions struct {
	kubeconfig     string
	driver         string
	requestTimeout time.Duration
	log            *slog.Logger
}

// ConfigOption tunes NewConfiguration.
type ConfigOption func(*configOptions)

// WithKubeconfig reads the cluster from this kubeconfig file instead of
// KUBECONFIG, ~/.kube/config or the in-cluster service account.
func WithKubeconfig(path string) ConfigOption { return func(o *configOptions) { o.kubeconfig = path } }

// WithStorageDriver picks Helm's release store: secret (default), configmap, memory or sql.
func WithStorageDriver(name string) ConfigOption { return func(o *configOptions) { o.driver = name } }

// WithRequestTimeout bounds every Kubernetes API request (default DefaultRequestTimeout).
func WithRequestTimeout(d time.Duration) ConfigOption {
	return func(o *configOptions) { o.requestTimeout = d }
}

// WithLogger receives Helm's debug lines.
func WithLogger(l *slog.Logger) ConfigOption { return func(o *configOptions) { o.log = l } }

// NewConfiguration is the Helm action configuration for releases in
// namespace ("" takes the kubeconfig's, or the pod's in-cluster namespace),
// and the namespace it resolved. Nothing is contacted until it is used.
func NewConfiguration(namespace string, opts ...ConfigOption) (*action.Configuration, string, error) {
	o := configOptions{requestTimeout: DefaultRequestTimeout, log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&o)
	}
	settings := helmcli.New()
	if o.kubeconfig != "" {
		settings.KubeConfig = o.kubeconfig
	}
	if namespace != "" {
		settings.SetNamespace(namespace)
	}
	getter := settings.RESTClientGetter()
	if cf, ok := getter.(*genericclioptions.ConfigFlags); ok && o.requestTimeout > 0 {
		// client-go has no request timeout by default: a hung API server
		// would hang the tick.
		t := o.requestTimeout.String()
		cf.Timeout = &t
	}
	namespace = settings.Namespace()
	cfg := new(action.Configuration)
	log := func(format string, v ...any) { o.log.Debug("helm: " + fmt.Sprintf(format, v...)) }
	if err := cfg.Init(getter, namespace, o.driver, log); err != nil {
		return nil, namespace, fmt.Errorf("setting up Helm for namespace %q: %w", namespace, err)
	}
	return cfg, namespace, nil
}
