// What the ceiling writes for a pod with ResourceClaims, with no scheduling logic: what a
// scheduler must write for them, so that a DRA workload's ceiling is the plane's limit for the
// same API work kube-scheduler does, not for a bare Binding. The same as the Python ceiling's
// (benchmarks/ceiling_dra.py).
//
// The devices come from the ResourceSlices of the ceiling's nodes, listed once, less those the
// claims held at the start; a pod's devices are the next node in turn with enough free ones (no
// CEL, no DeviceClass: the benchmark's class selects every device of its driver). The claims are
// read from an informer, as kube-scheduler reads them, and a pod waits for them there; a claim
// made from a template is the one the pod's status.resourceClaimStatuses names.
//
// Per pod the requests are kube-scheduler's binding cycle for it (bindingCycle in
// schedule_one.go, bindClaim of the DynamicResources plugin): the pod's nominatedNodeName
// patched, each claim's finalizer added with an update, its allocation and reservedFor written
// in one status update, then the Binding. kube-scheduler's one request more per pod is its
// Scheduled Event, which no ceiling sends.
package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
)

// finalizer is what kube-scheduler puts on a claim before allocating it (resourceapi.Finalizer).
const finalizer = "resource.kubernetes.io/delete-protection"

type device struct{ driver, pool, name string }

// devices are the free devices of each node, handed out round-robin over the nodes.
type devices struct {
	nodes []string
	free  map[string][]device
	next  int
}

func newDevices(nodes []string, sliceList []resourcev1.ResourceSlice, taken map[device]bool) *devices {
	d := &devices{nodes: nodes, free: map[string][]device{}}
	for _, n := range nodes {
		d.free[n] = nil
	}
	for i := range sliceList {
		spec := &sliceList[i].Spec
		if spec.NodeName == nil {
			continue // not node-local
		}
		if _, ours := d.free[*spec.NodeName]; !ours {
			continue
		}
		for _, dev := range spec.Devices {
			key := device{spec.Driver, spec.Pool.Name, dev.Name}
			if !taken[key] {
				d.free[*spec.NodeName] = append(d.free[*spec.NodeName], key)
			}
		}
	}
	return d
}

// take gives the next node in turn with count free devices, and those devices, now taken.
func (d *devices) take(count int) (string, []device, bool) {
	for range d.nodes {
		node := d.nodes[d.next%len(d.nodes)]
		d.next++
		if count == 0 {
			return node, nil, true
		}
		if got, ok := d.takeOn(node, count); ok {
			return node, got, true
		}
	}
	return "", nil, false
}

// giveBack frees the devices of a claim no longer allocated (a steady-state run's pods are
// deleted once bound, and the resourceclaim controller then takes their allocations off).
func (d *devices) giveBack(claim *resourcev1.ResourceClaim) {
	node := allocatedNode(claim)
	if _, ours := d.free[node]; !ours {
		return
	}
	for _, r := range claim.Status.Allocation.Devices.Results {
		key := device{r.Driver, r.Pool, r.Device}
		if !slices.Contains(d.free[node], key) {
			d.free[node] = append(d.free[node], key)
		}
	}
}

func (d *devices) takeOn(node string, count int) ([]device, bool) {
	free := d.free[node]
	if len(free) < count {
		return nil, false
	}
	d.free[node] = free[count:]
	return free[:count:count], true
}

// claimNames are the pod's claims; false while one made from a template is not named yet.
func claimNames(pod *corev1.Pod) ([]string, bool) {
	named := map[string]*string{}
	for _, s := range pod.Status.ResourceClaimStatuses {
		named[s.Name] = s.ResourceClaimName
	}
	var names []string
	for _, ref := range pod.Spec.ResourceClaims {
		if ref.ResourceClaimName != nil {
			names = append(names, *ref.ResourceClaimName)
			continue
		}
		name, ok := named[ref.Name]
		if !ok {
			return nil, false
		}
		if name != nil { // none: the template made no claim for it
			names = append(names, *name)
		}
	}
	return names, true
}

// requestsOf names the request of each device the claim asks for, as its results name them.
func requestsOf(claim *resourcev1.ResourceClaim) []string {
	var names []string
	for _, r := range claim.Spec.Devices.Requests {
		name, mode, count := r.Name, resourcev1.DeviceAllocationModeExactCount, int64(1)
		switch {
		case r.Exactly != nil:
			mode, count = r.Exactly.AllocationMode, r.Exactly.Count
		case len(r.FirstAvailable) > 0:
			sub := r.FirstAvailable[0]
			name, mode, count = r.Name+"/"+sub.Name, sub.AllocationMode, sub.Count
		default:
			continue
		}
		if mode == resourcev1.DeviceAllocationModeAll || count < 1 {
			count = 1
		}
		for range count {
			names = append(names, name)
		}
	}
	return names
}

// allocatedNode is the node an allocated claim's node selector names, or "".
func allocatedNode(claim *resourcev1.ResourceClaim) string {
	if claim.Status.Allocation == nil || claim.Status.Allocation.NodeSelector == nil {
		return ""
	}
	for _, term := range claim.Status.Allocation.NodeSelector.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			if f.Key == "metadata.name" && len(f.Values) > 0 {
				return f.Values[0]
			}
		}
	}
	return ""
}

type placement struct {
	node    string
	claims  []*resourcev1.ResourceClaim
	devices [][]device // per claim; none for one already allocated, which is only reserved
}

type claimWriter struct {
	client  kubernetes.Interface
	lister  resourcelisters.ResourceClaimLister
	mu      sync.Mutex // guards devices: pods are placed from their own goroutines
	devices *devices
}

// startClaims lists the slices and starts the claim informer, waiting until it has synced.
func startClaims(ctx context.Context, client kubernetes.Interface, nodes []string) (*claimWriter, error) {
	sliceList, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing resource slices: %w", err)
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	claims := factory.Resource().V1().ResourceClaims()
	w := &claimWriter{client: client, lister: claims.Lister()}
	released := func(claim *resourcev1.ResourceClaim) {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.devices != nil {
			w.devices.giveBack(claim)
		}
	}
	_, err = claims.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			before, after := oldObj.(*resourcev1.ResourceClaim), newObj.(*resourcev1.ResourceClaim)
			if before.Status.Allocation != nil && after.Status.Allocation == nil {
				released(before)
			}
		},
		DeleteFunc: func(obj any) {
			if claim, ok := obj.(*resourcev1.ResourceClaim); ok && claim.Status.Allocation != nil {
				released(claim)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	all, err := claims.Lister().List(labels.Everything())
	if err != nil {
		return nil, err
	}
	taken := map[device]bool{}
	for _, c := range all {
		if c.Status.Allocation != nil {
			for _, r := range c.Status.Allocation.Devices.Results {
				taken[device{r.Driver, r.Pool, r.Device}] = true
			}
		}
	}
	w.mu.Lock()
	w.devices = newDevices(nodes, sliceList.Items, taken)
	w.mu.Unlock()
	return w, nil
}

// place reads the pod's claims from the informer (waiting for them) and gives it a node: that
// of a claim already allocated, else the next in turn with enough free devices for them all.
func (w *claimWriter) place(ctx context.Context, pod *corev1.Pod, names []string) (*placement, bool) {
	p := &placement{}
	wanted := make([]int, len(names))
	total := 0
	for i, name := range names {
		claim, err := w.lister.ResourceClaims(pod.Namespace).Get(name)
		for err != nil {
			select {
			case <-ctx.Done():
				return nil, false
			case <-time.After(10 * time.Millisecond):
			}
			claim, err = w.lister.ResourceClaims(pod.Namespace).Get(name)
		}
		p.claims = append(p.claims, claim)
		if node := allocatedNode(claim); node != "" {
			p.node = node
		} else {
			wanted[i] = len(requestsOf(claim))
			total += wanted[i]
		}
	}
	// While no node has them free, wait up to a minute for devices to come back.
	fixed := p.node
	var got []device
	for deadline := time.Now().Add(time.Minute); ; {
		ok := true
		w.mu.Lock()
		if fixed != "" {
			got, ok = w.devices.takeOn(fixed, total)
		} else {
			p.node, got, ok = w.devices.take(total)
		}
		w.mu.Unlock()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			return nil, false
		}
		select {
		case <-ctx.Done():
			return nil, false
		case <-time.After(5 * time.Millisecond):
		}
	}
	for _, n := range wanted {
		p.devices = append(p.devices, got[:n:n])
		got = got[n:]
	}
	return p, true
}

// write is what kube-scheduler writes before the pod's Binding.
func (w *claimWriter) write(ctx context.Context, pod *corev1.Pod, p *placement) error {
	if pod.Status.NominatedNodeName != p.node {
		patch := fmt.Sprintf(`{"status":{"nominatedNodeName":%q}}`, p.node)
		_, err := w.client.CoreV1().Pods(pod.Namespace).Patch(
			ctx, pod.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
		if err != nil {
			return fmt.Errorf("nominated node: %w", err)
		}
	}
	for i, claim := range p.claims {
		if err := w.writeClaim(ctx, pod, claim, p.devices[i], p.node); err != nil {
			return err
		}
	}
	return nil
}

func (w *claimWriter) writeClaim(ctx context.Context, pod *corev1.Pod, claim *resourcev1.ResourceClaim, got []device, node string) error {
	api := w.client.ResourceV1().ResourceClaims(claim.Namespace)
	requests := requestsOf(claim)
	name := claim.Name
	claim = claim.DeepCopy()
	refresh := false
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		if refresh {
			if claim, err = api.Get(ctx, name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		refresh = true
		if len(got) > 0 {
			if !slices.Contains(claim.Finalizers, finalizer) {
				claim.Finalizers = append(claim.Finalizers, finalizer)
				if claim, err = api.Update(ctx, claim, metav1.UpdateOptions{}); err != nil {
					return err
				}
			}
			results := make([]resourcev1.DeviceRequestAllocationResult, len(got))
			for i, d := range got {
				results[i] = resourcev1.DeviceRequestAllocationResult{
					Request: requests[i], Driver: d.driver, Pool: d.pool, Device: d.name,
				}
			}
			claim.Status.Allocation = &resourcev1.AllocationResult{
				Devices: resourcev1.DeviceAllocationResult{Results: results},
				NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchFields: []corev1.NodeSelectorRequirement{{
						Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node},
					}},
				}}},
			}
		}
		claim.Status.ReservedFor = append(claim.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{
			Resource: "pods", Name: pod.Name, UID: pod.UID,
		})
		_, err = api.UpdateStatus(ctx, claim, metav1.UpdateOptions{})
		return err
	})
}
