package localenv

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"berth.dev/berth/internal/kubeconfig"
)

// IngressDirEnv names the environment variable holding the directory hack/ingress.sh
// builds: the Traefik binary and, under crds/, the Gateway API's and Traefik's
// CustomResourceDefinitions. `make test` sets it.
const IngressDirEnv = "BERTH_INGRESSCTL"

const (
	// IngressControllerName is the spec.controller of the IngressClasses the ingress
	// controller serves (Traefik's).
	IngressControllerName = "traefik.io/ingress-controller"
	// GatewayControllerName is the spec.controllerName of the GatewayClasses it serves.
	GatewayControllerName = "traefik.io/gateway-controller"
	// GatewayClassLabel marks the GatewayClass a controller started here serves: each
	// serves only the class carrying its own name in this label, so controllers of
	// several tests on one cluster do not fight over each other's Gateways.
	GatewayClassLabel = "berth.dev/test-gateway-class"
	// ingressFieldManager applies the CRDs and classes StartIngressController needs.
	ingressFieldManager = "berth-localenv"
)

// FindIngressController returns the directory holding the ingress controller:
// $BERTH_INGRESSCTL when set, otherwise the cache directory hack/ingress.sh reports for
// the source tree containing the working directory (without building anything).
func FindIngressController(ctx context.Context) (string, error) {
	return findBuilt(ctx, IngressDirEnv, "ingress.sh",
		"traefik", filepath.Join("crds", "gateway-api"), filepath.Join("crds", "traefik"))
}

// BuildIngressController builds (or reuses) the ingress controller with hack/ingress.sh
// from the berth source tree containing the working directory, its progress to
// progress, and returns its directory as FindIngressController finds it ($BERTH_INGRESSCTL
// must be unset).
func BuildIngressController(ctx context.Context, progress io.Writer) (string, error) {
	if err := runHackScript(ctx, "ingress.sh", "the ingress controller", progress); err != nil {
		return "", err
	}
	return FindIngressController(ctx)
}

// IngressControllerOptions configures StartIngressController.
type IngressControllerOptions struct {
	// Kubeconfig is the path of the kubeconfig the controller watches the cluster
	// with (required). Give one with its certificates inline (WriteFlatKubeconfig).
	Kubeconfig string
	// Dir holds the controller's log (required).
	Dir string
	// BinDir holds what hack/ingress.sh builds; empty: FindIngressController.
	BinDir string
	// IngressClass names the IngressClass whose Ingresses the controller routes
	// (required). StartIngressController creates it with controller IngressControllerName;
	// an existing class of that name with another controller is an error.
	IngressClass string
	// GatewayClass, when set, names the GatewayClass whose Gateways' HTTPRoutes the
	// controller routes as well: StartIngressController installs the Gateway API's
	// standard CRDs and creates the class (controllerName GatewayControllerName, label
	// GatewayClassLabel). The controller serves a Gateway listener whose port is its
	// HTTPPort (or, with TLS certificateRefs, its HTTPSPort).
	GatewayClass string
	// HTTPPort and HTTPSPort, when set, are the entry points' loopback ports; 0: free
	// ports. (A restart, below, keeps the addresses the controller was started at.)
	HTTPPort, HTTPSPort int
	// Restart says how the process is restarted, with the same arguments, when it
	// exits by itself (RestartPolicy's defaults; Max < 0: never, Failed is closed).
	Restart RestartPolicy
	// Log receives its exits and restarts (nil: discarded).
	Log *slog.Logger
	// StartTimeout bounds the start-up (default 1 minute).
	StartTimeout time.Duration
}

// IngressController is a running Traefik on 127.0.0.1 routing the cluster's Ingresses
// (and HTTPRoutes) of its classes to the endpoint addresses in their Services'
// EndpointSlices. It also serves Traefik's own CRDs (traefik.io Middleware,
// ServersTransport, ...), which StartIngressController installs: Ingress annotations
// such as traefik.ingress.kubernetes.io/router.middlewares refer to them.
type IngressController struct {
	// HTTPAddr is the host:port of the plain-HTTP entry point.
	HTTPAddr string
	// HTTPSAddr is the host:port of the HTTPS entry point: Ingresses' tls secrets, or
	// Traefik's self-signed default certificate for hosts without one.
	HTTPSAddr string
	// HTTPPort and HTTPSPort are the two entry points' ports, for Gateway listeners.
	HTTPPort, HTTPSPort int
	// Traefik's process: Failed, Err, Stop, LogPath, Restarts.
	*Service
}

// StartIngressController installs the CRDs and classes the controller needs, starts it
// on free loopback ports and returns once it answers its health check. Routes appear a
// moment after their objects do: poll for them. The caller must call Stop.
func StartIngressController(ctx context.Context, opts IngressControllerOptions) (*IngressController, error) {
	if opts.Kubeconfig == "" || opts.Dir == "" || opts.IngressClass == "" {
		return nil, errors.New("ingress controller: Kubeconfig, Dir and IngressClass are required")
	}
	ctx, cancel, err := startup(ctx, opts.StartTimeout, &opts.BinDir, FindIngressController)
	if err != nil {
		return nil, err
	}
	defer cancel()
	if err := installIngressResources(ctx, opts); err != nil {
		return nil, err
	}
	return onFreePorts(func() (*IngressController, error) { return startIngressController(ctx, opts) }, nil)
}

func startIngressController(ctx context.Context, opts IngressControllerOptions) (*IngressController, error) {
	ports, err := FreePorts(ctx, 3)
	if err != nil {
		return nil, err
	}
	c := &IngressController{HTTPPort: cmp.Or(opts.HTTPPort, ports[0]), HTTPSPort: cmp.Or(opts.HTTPSPort, ports[1])}
	c.HTTPAddr, c.HTTPSAddr = hostPort(c.HTTPPort), hostPort(c.HTTPSPort)
	pingAddr := hostPort(ports[2])
	args := []string{
		// Nothing leaves this machine: no version check, no usage report.
		"--global.checkNewVersion=false",
		"--global.sendAnonymousUsage=false",
		"--log.level=INFO",
		"--log.noColor=true",
		"--entryPoints.web.address=" + c.HTTPAddr,
		"--entryPoints.web.asDefault=true",
		"--entryPoints.websecure.address=" + c.HTTPSAddr,
		"--entryPoints.websecure.asDefault=true",
		"--entryPoints.websecure.http.tls=true",
		"--entryPoints.ping.address=" + pingAddr,
		"--ping=true",
		"--ping.entryPoint=ping",
		"--providers.kubernetesingress=true",
		"--providers.kubernetesingress.ingressClass=" + opts.IngressClass,
		"--providers.kubernetescrd=true",
	}
	// Stop promptly: a test's idle keep-alive connections would hold the default 10 s.
	for _, ep := range []string{"web", "websecure", "ping"} {
		args = append(args, "--entryPoints."+ep+".transport.lifeCycle.graceTimeOut=1s")
	}
	if opts.GatewayClass != "" {
		args = append(args,
			"--providers.kubernetesgateway=true",
			"--providers.kubernetesgateway.labelSelector="+GatewayClassLabel+"="+opts.GatewayClass,
		)
	}
	c.Service, err = StartService(ServiceOptions{Name: "traefik", Bin: filepath.Join(opts.BinDir, "traefik"), Args: args,
		// Not in-cluster, whatever this environment says: the kubeconfig's cluster.
		Env:    []string{"KUBECONFIG=" + opts.Kubeconfig, "KUBERNETES_SERVICE_HOST=", "KUBERNETES_SERVICE_PORT="},
		LogDir: opts.Dir, Grace: 5 * time.Second, Restart: opts.Restart, Log: opts.Log})
	if err != nil {
		return nil, err
	}
	client := &http.Client{Timeout: 2 * time.Second}
	defer client.CloseIdleConnections()
	if err := waitFor(ctx, "traefik ping", 50*time.Millisecond, c.exited, httpOK(client, "http://"+pingAddr+"/ping")); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

var (
	crdGVR          = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	ingressClassGVR = schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingressclasses"}
	gatewayClassGVR = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gatewayclasses"}
)

// installIngressResources applies the CRDs the controller's providers watch and the
// classes it serves.
func installIngressResources(ctx context.Context, opts IngressControllerOptions) error {
	cfg, err := kubeconfig.Load(opts.Kubeconfig)
	if err != nil {
		return fmt.Errorf("ingress controller: %w", err)
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("ingress controller: client: %w", err)
	}
	crdDirs := []string{filepath.Join(opts.BinDir, "crds", "traefik")}
	if opts.GatewayClass != "" {
		crdDirs = append(crdDirs, filepath.Join(opts.BinDir, "crds", "gateway-api"))
	}
	var crds []string
	for _, d := range crdDirs {
		names, err := applyManifestDir(ctx, dc, d)
		if err != nil {
			return err
		}
		crds = append(crds, names...)
	}
	for _, name := range crds {
		if err := waitCRDEstablished(ctx, dc, name); err != nil {
			return err
		}
	}

	ic := map[string]any{
		"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
		"metadata": map[string]any{"name": opts.IngressClass},
		"spec":     map[string]any{"controller": IngressControllerName},
	}
	if err := apply(ctx, dc, ingressClassGVR, ingressFieldManager, ic); err != nil {
		return err
	}
	if opts.GatewayClass != "" {
		gc := map[string]any{
			"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
			"metadata": map[string]any{"name": opts.GatewayClass, "labels": map[string]any{GatewayClassLabel: opts.GatewayClass}},
			"spec":     map[string]any{"controllerName": GatewayControllerName},
		}
		if err := apply(ctx, dc, gatewayClassGVR, ingressFieldManager, gc); err != nil {
			return err
		}
	}
	return nil
}

// applyManifestDir server-side applies every CustomResourceDefinition in the YAML files
// of dir (one or more documents each) and returns their names.
func applyManifestDir(ctx context.Context, dc dynamic.Interface, dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.y*ml"))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read CRDs: %w", err)
		}
		for _, doc := range bytes.Split(b, []byte("\n---")) {
			var obj map[string]any
			if err := yaml.Unmarshal(doc, &obj); err != nil {
				return nil, fmt.Errorf("CRDs %s: %w", f, err)
			}
			if obj == nil || obj["kind"] != "CustomResourceDefinition" {
				continue
			}
			if err := apply(ctx, dc, crdGVR, ingressFieldManager, obj); err != nil {
				return nil, err
			}
			names = append(names, (&unstructured.Unstructured{Object: obj}).GetName())
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: no CRDs in %s", ErrMissingDependency, dir)
	}
	return names, nil
}

// apply server-side applies obj (apiVersion, kind, name and, for a namespaced kind,
// namespace set) as resource gvr, owned by fieldManager.
func apply(ctx context.Context, dc dynamic.Interface, gvr schema.GroupVersionResource, fieldManager string, obj map[string]any) error {
	u := &unstructured.Unstructured{Object: obj}
	what := u.GetKind() + " " + u.GetName()
	if ns := u.GetNamespace(); ns != "" {
		what = u.GetKind() + " " + ns + "/" + u.GetName()
	}
	body, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("apply %s: %w", what, err)
	}
	if _, err := dc.Resource(gvr).Namespace(u.GetNamespace()).Patch(ctx, u.GetName(), types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: fieldManager, Force: new(true)}); err != nil {
		return fmt.Errorf("apply %s: %w", what, err)
	}
	return nil
}

func waitCRDEstablished(ctx context.Context, dc dynamic.Interface, name string) error {
	return waitFor(ctx, "CRD "+name+" established", 50*time.Millisecond, func() error { return nil },
		func(ctx context.Context) (bool, error) {
			u, err := dc.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conds {
				if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
}
