// Package kubeconfig loads the client configuration of a Kubernetes cluster: from a
// kubeconfig file, or, without one, the service account of the pod berth runs in. It
// is the one loader of the provider, the operators, berth dev and the local
// environment.
package kubeconfig

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Load reads the kubeconfig at path (its current context), or the in-cluster
// configuration when path is empty; the error says which failed and why.
func Load(path string) (*rest.Config, error) {
	if path == "" {
		rc, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("kubeconfig: empty, and not running in a cluster: %w", err)
		}
		return rc, nil
	}
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return rc, nil
}
