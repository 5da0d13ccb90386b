package reconcile

import (
	"encoding/base64"
	"encoding/json"
	"hash/fnv"
	"os"
	"strings"
	"time"

	"github.com/chartpin/chartpin/internal/failure"
)

// SpreadDelay is a deterministic delay in [0, window) for one edge, derived
// from key: the same edge waits the same time on every tick, and a fleet's
// edges spread evenly over the window instead of all asking the registry in
// the same second of the schedule.
func SpreadDelay(key string, window time.Duration) time.Duration {
	if window <= 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(key))
	return time.Duration(h.Sum64() % uint64(window))
}

// ServiceAccountKey is "namespace/uid" of the ServiceAccount whose token is
// mounted at path: the release's own reconcile ServiceAccount, which differs
// on every edge and stays the same across its ticks. The token is only read,
// never verified or printed.
func ServiceAccountKey(path string) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", failure.Optionf("reading the service account token: %w; outside a cluster pass {{JitterKey}}", err)
	}
	parts := strings.Split(strings.TrimSpace(string(raw)), ".")
	if len(parts) != 3 {
		return "", failure.Optionf("the service account token is not a JWT; pass {{JitterKey}}")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", failure.Optionf("the service account token's claims are not base64url; pass {{JitterKey}}")
	}
	var claims struct {
		K8s struct {
			Namespace      string `json:"namespace"`
			ServiceAccount struct {
				UID string `json:"uid"`
			} `json:"serviceaccount"`
		} `json:"kubernetes.io"`
		// Tokens from a Secret (before projected tokens).
		LegacyNamespace string `json:"kubernetes.io/serviceaccount/namespace"`
		LegacyUID       string `json:"kubernetes.io/serviceaccount/service-account.uid"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return "", failure.Optionf("the service account token's claims are not JSON; pass {{JitterKey}}")
	}
	ns, uid := claims.K8s.Namespace, claims.K8s.ServiceAccount.UID
	if uid == "" {
		ns, uid = claims.LegacyNamespace, claims.LegacyUID
	}
	if ns == "" || uid == "" {
		return "", failure.Optionf("the service account token names no namespace and uid; pass {{JitterKey}}")
	}
	return ns + "/" + uid, nil
}
