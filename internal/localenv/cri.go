package localenv

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// This file: the few CRI calls a real node's teardown makes of its containerd (list,
// stop and remove pod sandboxes), spoken in protobuf's wire format directly. Stopping a
// sandbox through the CRI is what runs the CNI teardown (its veth, its address, its
// port mappings) and ends its containers; the kubelet, stopped first, no longer does.

// criClient calls containerd's CRI runtime service on its socket.
type criClient struct{ conn *grpc.ClientConn }

func dialCRI(socket string) (*criClient, error) {
	conn, err := grpc.NewClient("unix://"+socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{})))
	if err != nil {
		return nil, fmt.Errorf("dial containerd's CRI at %s: %w", socket, err)
	}
	return &criClient{conn: conn}, nil
}

func (c *criClient) close() { _ = c.conn.Close() }

const criService = "/runtime.v1.RuntimeService/"

func (c *criClient) call(ctx context.Context, method string, req []byte) ([]byte, error) {
	var resp []byte
	if err := c.conn.Invoke(ctx, criService+method, &req, &resp); err != nil {
		return nil, fmt.Errorf("CRI %s: %w", method, err)
	}
	return resp, nil
}

// sandboxes lists the IDs of every pod sandbox, running or not.
func (c *criClient) sandboxes(ctx context.Context) ([]string, error) {
	resp, err := c.call(ctx, "ListPodSandbox", nil)
	if err != nil {
		return nil, err
	}
	// ListPodSandboxResponse: repeated PodSandbox items = 1; PodSandbox: string id = 1.
	var ids []string
	for _, item := range protoFields(resp, 1) {
		for _, id := range protoFields(item, 1) {
			ids = append(ids, string(id))
		}
	}
	return ids, nil
}

// removeSandbox stops the sandbox (its containers and network) and removes it.
func (c *criClient) removeSandbox(ctx context.Context, id string) error {
	// StopPodSandboxRequest and RemovePodSandboxRequest: string pod_sandbox_id = 1.
	req := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), id)
	if _, err := c.call(ctx, "StopPodSandbox", req); err != nil {
		return err
	}
	_, err := c.call(ctx, "RemovePodSandbox", req)
	return err
}

// protoFields returns the values of the length-delimited field num in a protobuf
// message, in order; a malformed message yields what was read before the damage.
func protoFields(msg []byte, num protowire.Number) [][]byte {
	var out [][]byte
	for len(msg) > 0 {
		n, typ, l := protowire.ConsumeTag(msg)
		if l < 0 {
			return out
		}
		msg = msg[l:]
		if n == num && typ == protowire.BytesType {
			v, vl := protowire.ConsumeBytes(msg)
			if vl < 0 {
				return out
			}
			out = append(out, v)
			msg = msg[vl:]
			continue
		}
		vl := protowire.ConsumeFieldValue(n, typ, msg)
		if vl < 0 {
			return out
		}
		msg = msg[vl:]
	}
	return out
}

// rawCodec passes messages through as the bytes they already are.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("raw codec: cannot marshal %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(*b)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("raw codec: cannot unmarshal into %T", v)
	}
	*b = data.Materialize()
	return nil
}
