// Package fanout runs one call per key concurrently: the one fan-out that
// the resolver's batch lookups and pin's per-run lookups share. It bounds
// nothing itself; the resolver bounds the requests in flight.
package fanout

import "sync"

// Map calls fn once per distinct key, all concurrently, and returns the
// values of the calls that succeeded and the errors of the others, by key.
func Map[K comparable, T any](keys []K, fn func(K) (T, error)) (map[K]T, map[K]error) {
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		out  = make(map[K]T, len(keys))
		errs = map[K]error{}
		seen = make(map[K]bool, len(keys))
	)
	for _, k := range keys {
		if seen[k] {
			continue
		}
		seen[k] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := fn(k)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs[k] = err
				return
			}
			out[k] = v
		}()
	}
	wg.Wait()
	return out, errs
}
