package localenv

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// kwokStages are the stage files (from kwok's kustomize/stage, copied by
// hack/testbin.sh) that make simulated nodes and pods behave: nodes initialise and
// heartbeat with leases, pods become Ready at once and complete or delete as asked,
// PVCs bind to provisioned PVs.
var kwokStages = []string{
	"node/fast/node-initialize.yaml",
	"node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
	"pod/fast/pod-ready.yaml",
	"pod/fast/pod-complete.yaml",
	"pod/fast/pod-delete.yaml",
	"volume/fast/pvc-provision.yaml",
	"volume/fast/pv-bind.yaml",
	"volume/fast/pv-delete.yaml",
	"volume/fast/pvc-delete.yaml",
}

// podReadyAgain is berth's own stage, the part of a kubelet kwok's stages leave out. The
// node lifecycle controller marks every pod of a node it stops hearing from not Ready
// (an API-server outage longer than its grace period does it to every node); a real
// kubelet reports its pods Ready again once it reaches the API server, kwok's pod-ready
// stage only ever readies Pending pods. Without this stage such a Deployment never
// becomes available again and a rollout stalls for good.
const podReadyAgain = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: berth-pod-ready-again
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values:
      - 'Running'
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'In'
      values:
      - 'False'
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Ready
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: ContainersReady
`

// writeKwokConfig writes kwok's --config: the stages plus a ClusterLogs serving logFile
// as every container's log. It gives kwok no ClusterExec: the node server runs every
// exec, and without one an exec that reached kwok would fail before its exec code (which
// panics on a terminal without stdin). throughput raises kwok's parallelism from its
// defaults (4 stage and lease workers, 1 pod sync worker). kwok's client has no rate
// limit of its own.
func writeKwokConfig(path, stagesDir, logFile string, throughput bool) error {
	var b bytes.Buffer
	for _, s := range kwokStages {
		data, err := os.ReadFile(filepath.Join(stagesDir, s))
		if err != nil {
			return fmt.Errorf("read kwok stage %s: %w", s, err)
		}
		b.WriteString("---\n")
		b.Write(data)
		if !bytes.HasSuffix(data, []byte("\n")) {
			b.WriteByte('\n')
		}
	}
	b.WriteString("---\n" + podReadyAgain)
	fmt.Fprintf(&b, `---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata:
  name: berth-testenv-logs
spec:
  logs:
  - logsFile: %q
    follow: true
`, logFile)
	if throughput {
		b.WriteString(`---
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  podPlayStageParallelism: 16
  nodePlayStageParallelism: 16
  nodeLeaseParallelism: 16
  podsOnNodeSyncParallelism: 4
`)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		return fmt.Errorf("write kwok config: %w", err)
	}
	return nil
}
