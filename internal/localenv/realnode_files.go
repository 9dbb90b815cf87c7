package localenv

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// This file: the configuration files of a real node (realnode.go): containerd's, the
// CNI network's, the kubelet's and kube-proxy's, and their credentials.

// realNodeFiles are where a real node keeps its state and configuration.
type realNodeFiles struct {
	dir string
	// containerd
	containerdConfig, containerdRoot, containerdState, socket string
	// CNI
	cniConf, cniIPAM string
	// registries: containerd's hosts directory (a hosts.toml per registry)
	registries string
	// kubelet
	kubeletConfig, kubeletKubeconfig, kubeletRoot, podLogs, resolvConf, pluginDir string
	kubeletServing                                                                certPair
	// kube-proxy
	proxyConfig, proxyKubeconfig string
	logs                         string
}

func newRealNodeFiles(dir string) realNodeFiles {
	return realNodeFiles{
		dir:               dir,
		containerdConfig:  filepath.Join(dir, "containerd", "config.toml"),
		containerdRoot:    filepath.Join(dir, "containerd", "root"),
		containerdState:   filepath.Join(dir, "containerd", "state"),
		socket:            filepath.Join(dir, "containerd", "containerd.sock"),
		cniConf:           filepath.Join(dir, "cni", "net.d"),
		cniIPAM:           filepath.Join(dir, "cni", "ipam"),
		registries:        filepath.Join(dir, "containerd", "certs.d"),
		kubeletConfig:     filepath.Join(dir, "kubelet", "config.yaml"),
		kubeletKubeconfig: filepath.Join(dir, "kubelet", "kubelet.kubeconfig"),
		kubeletRoot:       filepath.Join(dir, "kubelet", "root"),
		podLogs:           filepath.Join(dir, "kubelet", "pod-logs"),
		resolvConf:        filepath.Join(dir, "kubelet", "resolv.conf"),
		pluginDir:         filepath.Join(dir, "kubelet", "volume-plugins"),
		proxyConfig:       filepath.Join(dir, "kube-proxy", "config.yaml"),
		proxyKubeconfig:   filepath.Join(dir, "kube-proxy", "kube-proxy.kubeconfig"),
		logs:              filepath.Join(dir, "logs"),
	}
}

// realNodePorts are the loopback ports a real node's processes listen on.
type realNodePorts struct{ kubelet, kubeletHealth, proxyHealth, proxyMetrics int }

// write makes the node's directories and writes every configuration file, with the
// kubelet's and kube-proxy's credentials issued by the control plane's CA.
func (f *realNodeFiles) write(cp *ControlPlane, opts RealNodeOptions, ports realNodePorts) error {
	for _, d := range []string{f.containerdRoot, f.containerdState, f.registries, f.cniConf, f.cniIPAM, f.kubeletRoot, f.podLogs, f.pluginDir,
		filepath.Dir(f.proxyConfig), f.logs, filepath.Join(f.dir, "pki")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("real node: %w", err)
		}
	}
	p := cp.pki.in(filepath.Join(f.dir, "pki"))
	var err error
	if f.kubeletServing, err = p.serving("kubelet-"+opts.Name, []string{"localhost", opts.Name}, []net.IP{net.IPv4(127, 0, 0, 1)}); err != nil {
		return err
	}
	kubelet, err := p.client("kubelet-client-"+opts.Name, "system:node:"+opts.Name, "system:nodes")
	if err != nil {
		return err
	}
	proxy, err := p.client("kube-proxy", "system:kube-proxy")
	if err != nil {
		return err
	}
	if err := writeKubeconfig(f.kubeletKubeconfig, cp.APIServerURL, cp.pki.CAFile, kubelet); err != nil {
		return err
	}
	if err := writeKubeconfig(f.proxyKubeconfig, cp.APIServerURL, cp.pki.CAFile, proxy); err != nil {
		return err
	}
	// Pods ask the cluster DNS (clusterDNS: the kube-dns Service, CoreDNS). A pod of
	// dnsPolicy Default (CoreDNS itself) gets the kubelet's resolv.conf, whose only name
	// server is the pod's own loopback, where nothing answers: a lookup fails at once.
	// (Without one, containerd gives a pod the machine's resolv.conf, whose server is
	// off this machine: the pod's queries would be dropped, after a wait.)
	if err := os.WriteFile(f.resolvConf, []byte("nameserver 127.0.0.1\n"), 0o600); err != nil {
		return fmt.Errorf("real node: %w", err)
	}
	files := map[string]string{
		f.containerdConfig: f.containerdTOML(),
		filepath.Join(f.cniConf, "10-berth.conflist"): f.cniConflist(opts),
		f.kubeletConfig: f.kubeletYAML(cp, ports),
		f.proxyConfig:   f.proxyYAML(opts, ports),
	}
	for path, body := range files {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			return fmt.Errorf("real node: %w", err)
		}
	}
	return nil
}

// containerdTOML is containerd's configuration: its state in the node's directory,
// its socket there, the CRI with runc, Debian's CNI plugins and the node's network,
// and the project's own sandbox image.
func (f *realNodeFiles) containerdTOML() string {
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	return fmt.Sprintf(`version = 2
root = %s
state = %s
oom_score = 0

[grpc]
  address = %s

[ttrpc]
  address = %s

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = %s

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %s
  # Lowering oom_score_adj below 0 is refused on these machines, even as root.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  disable_apparmor = true
  max_container_log_line_size = 16384

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "runc"
        SystemdCgroup = false

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %s
    conf_dir = %s
    max_conf_num = 1

  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %s
`, q(f.containerdRoot), q(f.containerdState), q(f.socket), q(f.socket+".ttrpc"),
		q(filepath.Join(f.dir, "containerd", "opt")), q(PauseImageRef), q(CNIBinDir), q(f.cniConf), q(f.registries))
}

// cniConflist is the pod network: a bridge of the node's own with addresses from
// opts.PodCIDR, no masquerade (pods reach nothing off this machine), and port mappings.
func (f *realNodeFiles) cniConflist(opts RealNodeOptions) string {
	conf := map[string]any{
		"cniVersion": "0.4.0",
		"name":       "berth",
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": opts.Bridge, "isGateway": true, "ipMasq": false, "hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": opts.PodCIDR}}},
					"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
					"dataDir": f.cniIPAM,
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	b, _ := json.MarshalIndent(conf, "", "  ")
	return string(b)
}

// kubeletYAML is the kubelet's configuration: loopback only, the control plane's CA for
// its clients (the API server, for logs and exec), the cgroup v1 layout of these
// machines without QoS cgroups, and thresholds that keep it from evicting pods or
// deleting the project's imported images on a busy disk.
func (f *realNodeFiles) kubeletYAML(cp *ControlPlane, ports realNodePorts) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
tlsCertFile: %s
tlsPrivateKeyFile: %s
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: %s
authorization:
  mode: AlwaysAllow
cgroupDriver: cgroupfs
failCgroupV1: false
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
containerRuntimeEndpoint: unix://%s
resolvConf: %s
clusterDomain: cluster.local
clusterDNS: [%s]
podLogsDir: %s
volumePluginDir: %s
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  nodefs.inodesFree: 1%%
  imagefs.available: 1%%
syncFrequency: 10s
fileCheckFrequency: 10s
maxPods: 110
`, ports.kubelet, ports.kubeletHealth, f.kubeletServing.CertFile, f.kubeletServing.KeyFile, cp.pki.CAFile,
		f.socket, f.resolvConf, ClusterDNSIP(), f.podLogs, f.pluginDir)
}

// proxyYAML is kube-proxy's configuration: iptables mode, node ports on loopback, and
// no change to the machine's conntrack limits.
func (f *realNodeFiles) proxyYAML(opts RealNodeOptions, ports realNodePorts) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
hostnameOverride: %s
mode: iptables
clusterCIDR: %s
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:%d
metricsBindAddress: 127.0.0.1:%d
nodePortAddresses: ["127.0.0.0/8"]
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, f.proxyKubeconfig, opts.Name, opts.PodCIDR, ports.proxyHealth, ports.proxyMetrics)
}
