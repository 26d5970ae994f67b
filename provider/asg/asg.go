// Package asg is the provider for members that are the instances of an AWS
// auto-scaling group, as with etcd-cloud-operator: members are the group's
// InService instances, addressed by private IP and named by instance id;
// the desired size is the group's DesiredCapacity. It also carries the
// group's lifecycle to the member: an instance being terminated is leaving
// (its member removes itself, then the lifecycle hook is completed), and a
// member that cannot recover can ask the group to replace its instance.
//
// Credentials come from the SDK's standard chain; the exact IAM policy is
// in docs/asg.md.
package asg

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"

	"github.com/etcd-nomad/etcd-nomad/internal/awsconf"
	"github.com/etcd-nomad/etcd-nomad/provider"
)

// DefaultRefresh is how long one reading of the group is reused: members
// loop every second, the AWS APIs are asked at most this often.
const DefaultRefresh = 10 * time.Second

// Options configure a Provider.
type Options struct {
	// Group is the auto-scaling group's name.
	Group string
	// Region, optional, defaults to the SDK's chain (AWS_REGION, profile).
	Region string
	// Endpoint, optional, is one endpoint for the AutoScaling and EC2 APIs
	// (VPC endpoints, tests).
	Endpoint string
	// IMDSEndpoint, optional, is the instance metadata endpoint.
	IMDSEndpoint string
	// SelfID, optional, is this instance's id; by default read from IMDS.
	SelfID string
	// Ports of every member (instances share one port layout).
	ClientPort, PeerPort, StatusPort int
	// LifecycleHook, optional: when set, a terminating member completes
	// this hook (CONTINUE) once it has left the cluster.
	LifecycleHook string
	// Refresh, optional, defaults to DefaultRefresh.
	Refresh time.Duration
	// HTTPClient, optional, for the AWS SDK.
	HTTPClient *http.Client
}

// Instance is one instance of the group.
type Instance struct {
	ID        string
	Lifecycle string
	Health    string
	PrivateIP string
}

// State is one reading of the group.
type State struct {
	Desired   int
	Instances []Instance
	Read      time.Time
}

// autoScalingAPI is what the provider uses of the AutoScaling API.
type autoScalingAPI interface {
	autoscaling.DescribeAutoScalingGroupsAPIClient
	SetInstanceHealth(context.Context, *autoscaling.SetInstanceHealthInput, ...func(*autoscaling.Options)) (*autoscaling.SetInstanceHealthOutput, error)
	CompleteLifecycleAction(context.Context, *autoscaling.CompleteLifecycleActionInput, ...func(*autoscaling.Options)) (*autoscaling.CompleteLifecycleActionOutput, error)
}

// Provider lists the group's instances.
type Provider struct {
	o   Options
	as  autoScalingAPI
	ec2 ec2.DescribeInstancesAPIClient

	mu    sync.Mutex
	state *State
}

var _ provider.Provider = (*Provider)(nil)

// New builds the AWS clients and finds this instance's id (IMDS unless
// given).
func New(ctx context.Context, o Options) (*Provider, error) {
	if o.Group == "" {
		return nil, errors.New("asg provider: the auto-scaling group's name is required")
	}
	if o.Refresh <= 0 {
		o.Refresh = DefaultRefresh
	}
	cfg, err := awsconf.Load(ctx, o.Region, o.HTTPClient)
	if err != nil {
		return nil, err
	}
	if cfg.Region == "" {
		return nil, errors.New("asg provider: no AWS region: set region in the provider block or AWS_REGION")
	}
	p := &Provider{o: o}
	p.as = autoscaling.NewFromConfig(cfg, func(ao *autoscaling.Options) {
		if o.Endpoint != "" {
			ao.BaseEndpoint = aws.String(o.Endpoint)
		}
	})
	p.ec2 = ec2.NewFromConfig(cfg, func(eo *ec2.Options) {
		if o.Endpoint != "" {
			eo.BaseEndpoint = aws.String(o.Endpoint)
		}
	})
	if p.o.SelfID == "-" {
		p.o.SelfID = "" // no self: Nomad mode or a CLI
	} else if p.o.SelfID == "" {
		ic := imds.NewFromConfig(cfg, func(io *imds.Options) {
			if o.IMDSEndpoint != "" {
				io.Endpoint = o.IMDSEndpoint
			}
		})
		out, err := ic.GetMetadata(ctx, &imds.GetMetadataInput{Path: "instance-id"})
		if err != nil {
			return nil, fmt.Errorf("read this instance's id from the instance metadata service: %w", err)
		}
		defer out.Content.Close()
		var b [64]byte
		n, _ := out.Content.Read(b[:])
		p.o.SelfID = string(b[:n])
	}
	return p, nil
}

// SelfID is this instance's id.
func (p *Provider) SelfID() string { return p.o.SelfID }

// Self is this member's instance.
func (p *Provider) Self(ctx context.Context) (provider.Instance, error) {
	st, err := p.State(ctx)
	if err != nil {
		return provider.Instance{}, err
	}
	for _, in := range st.Instances {
		if in.ID == p.o.SelfID {
			return p.instance(in), nil
		}
	}
	return provider.Instance{}, fmt.Errorf("instance %s is not in auto-scaling group %s", p.o.SelfID, p.o.Group)
}

func (p *Provider) instance(in Instance) provider.Instance {
	return provider.Instance{Name: in.ID, Address: in.PrivateIP, ClientPort: p.o.ClientPort, PeerPort: p.o.PeerPort, StatusPort: p.o.StatusPort}
}

// describe explains AWS errors a user can act on.
func describe(op string, err error) error {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "InvalidClientTokenId", "UnrecognizedClientException", "AuthFailure", "SignatureDoesNotMatch", "InvalidAccessKeyId":
			return fmt.Errorf("%s: AWS rejected the credentials (%s: %s); check the credential chain (AWS_ACCESS_KEY_ID, AWS_PROFILE, instance role) and the region: %w", op, ae.ErrorCode(), ae.ErrorMessage(), err)
		case "AccessDenied", "AccessDeniedException", "UnauthorizedOperation":
			return fmt.Errorf("%s: the IAM policy lacks a permission (%s); see docs/asg.md for the minimal policy: %w", op, ae.ErrorMessage(), err)
		}
	}
	return fmt.Errorf("%s: %w", op, err)
}

// State reads the group (or returns the reading made within Refresh).
func (p *Provider) State(ctx context.Context) (State, error) {
	p.mu.Lock()
	if p.state != nil && time.Since(p.state.Read) < p.o.Refresh {
		st := *p.state
		p.mu.Unlock()
		return st, nil
	}
	p.mu.Unlock()
	st, err := p.read(ctx)
	if err != nil {
		return State{}, err
	}
	p.mu.Lock()
	p.state = &st
	p.mu.Unlock()
	return st, nil
}

// Invalidate drops the cached reading.
func (p *Provider) Invalidate() {
	p.mu.Lock()
	p.state = nil
	p.mu.Unlock()
}

func (p *Provider) read(ctx context.Context) (State, error) {
	st := State{Read: time.Now()}
	found := false
	pg := autoscaling.NewDescribeAutoScalingGroupsPaginator(p.as, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{p.o.Group}})
	for pg.HasMorePages() {
		out, err := pg.NextPage(ctx)
		if err != nil {
			return st, describe("describe auto-scaling group "+p.o.Group, err)
		}
		for _, g := range out.AutoScalingGroups {
			if aws.ToString(g.AutoScalingGroupName) != p.o.Group {
				continue
			}
			found = true
			st.Desired = int(aws.ToInt32(g.DesiredCapacity))
			for _, in := range g.Instances {
				st.Instances = append(st.Instances, Instance{ID: aws.ToString(in.InstanceId), Lifecycle: string(in.LifecycleState), Health: aws.ToString(in.HealthStatus)})
			}
		}
	}
	if !found {
		return st, fmt.Errorf("auto-scaling group %q not found (wrong name or region?)", p.o.Group)
	}
	if len(st.Instances) == 0 {
		return st, nil
	}
	ids := make([]string, len(st.Instances))
	for i, in := range st.Instances {
		ids[i] = in.ID
	}
	ips := map[string]string{}
	ipg := ec2.NewDescribeInstancesPaginator(p.ec2, &ec2.DescribeInstancesInput{InstanceIds: ids})
	for ipg.HasMorePages() {
		out, err := ipg.NextPage(ctx)
		if err != nil {
			return st, describe("describe instances of "+p.o.Group, err)
		}
		for _, r := range out.Reservations {
			for _, in := range r.Instances {
				ips[aws.ToString(in.InstanceId)] = aws.ToString(in.PrivateIpAddress)
			}
		}
	}
	for i := range st.Instances {
		st.Instances[i].PrivateIP = ips[st.Instances[i].ID]
	}
	sort.Slice(st.Instances, func(i, j int) bool { return st.Instances[i].ID < st.Instances[j].ID })
	return st, nil
}

// Instances are the group's InService instances with a private address.
func (p *Provider) Instances(ctx context.Context) ([]provider.Instance, error) {
	st, err := p.State(ctx)
	if err != nil {
		return nil, err
	}
	var out []provider.Instance
	for _, in := range st.Instances {
		if in.Lifecycle == string(astypes.LifecycleStateInService) && in.PrivateIP != "" {
			out = append(out, p.instance(in))
		}
	}
	return out, nil
}

// DesiredSize is the group's DesiredCapacity.
func (p *Provider) DesiredSize(ctx context.Context) (int, error) {
	st, err := p.State(ctx)
	return st.Desired, err
}

// Terminating reports whether lifecycle state s is on the way out.
func Terminating(s string) bool {
	switch astypes.LifecycleState(s) {
	case astypes.LifecycleStateTerminating, astypes.LifecycleStateTerminatingWait, astypes.LifecycleStateTerminatingProceed,
		astypes.LifecycleStateDetaching, astypes.LifecycleStateDetached:
		return true
	}
	return false
}

// Leaving reports whether this instance is being terminated or detached.
func (p *Provider) Leaving(ctx context.Context) (bool, error) {
	st, err := p.State(ctx)
	if err != nil {
		return false, err
	}
	for _, in := range st.Instances {
		if in.ID == p.o.SelfID {
			return Terminating(in.Lifecycle), nil
		}
	}
	return true, nil // no longer in the group
}

// Depart completes the lifecycle hook for this instance (CONTINUE) once its
// member has left, when a hook is configured and the instance waits on it.
func (p *Provider) Depart(ctx context.Context) error { return p.DepartInstance(ctx, p.o.SelfID) }

// DepartInstance completes the lifecycle hook (CONTINUE) for instance id,
// when a hook is configured.
func (p *Provider) DepartInstance(ctx context.Context, id string) error {
	if p.o.LifecycleHook == "" {
		return nil
	}
	_, err := p.as.CompleteLifecycleAction(ctx, &autoscaling.CompleteLifecycleActionInput{
		AutoScalingGroupName:  aws.String(p.o.Group),
		LifecycleHookName:     aws.String(p.o.LifecycleHook),
		InstanceId:            aws.String(id),
		LifecycleActionResult: aws.String("CONTINUE"),
	})
	if err != nil {
		return describe("complete lifecycle action "+p.o.LifecycleHook, err)
	}
	return nil
}

// ReplacementInFlight reports whether the group is already replacing an
// instance: one not InService, one marked Unhealthy, or fewer InService
// instances than desired.
func (p *Provider) ReplacementInFlight(ctx context.Context) (bool, error) {
	st, err := p.State(ctx)
	if err != nil {
		return false, err
	}
	inService := 0
	for _, in := range st.Instances {
		if in.Lifecycle != string(astypes.LifecycleStateInService) || in.Health == "Unhealthy" {
			return true, nil
		}
		inService++
	}
	return inService < st.Desired, nil
}

// MarkUnhealthy asks the group to replace instance id.
func (p *Provider) MarkUnhealthy(ctx context.Context, id string) error {
	_, err := p.as.SetInstanceHealth(ctx, &autoscaling.SetInstanceHealthInput{
		InstanceId:               aws.String(id),
		HealthStatus:             aws.String("Unhealthy"),
		ShouldRespectGracePeriod: aws.Bool(false),
	})
	p.Invalidate()
	if err != nil {
		return describe("mark instance "+id+" unhealthy", err)
	}
	return nil
}
