package sim

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/planner"
)

// defects are the fixes the simulation must catch when reverted: each
// switch restores the behaviour before its fix. from is the first seed
// searched (1 when 0): the defects found by long explorations (make sim
// from seed 1000) need a rare schedule (Consul restoring an older record)
// and start at a seed where today's model, with that one fix off, breaks
// an invariant: the seed that found them, or (SettleOnOwnRecord, whose
// seed 39512 runs another schedule since the seed's metadata moved) the
// first found by searching from seed 1. The operator's (operator.go) start
// at the seed that found them, or the first found since the later fixes
// changed the runs.
var defects = []struct {
	name string
	d    Defects
	from uint64
	// collect runs the defect's search with the collectRunning fault (off:
	// Config.NoCollectRunning, the schedules its seed was found with).
	collect bool
	// lost, when not empty, says why no seed catches the defect in
	// today's model yet (its test is skipped, not passed).
	lost string
}{
	{"defect 1: SeedWhileSilent", Defects{Planner: planner.Faults{SeedWhileSilent: true}}, 0, false, ""},
	// Found from seed 1 until a last voter's stop saved a snapshot
	// (task's BeforeStop, modelled since); 922 the first from 1 since.
	{"defect 1: SetAsideOnUnconfirmed", Defects{Planner: planner.Faults{SetAsideOnUnconfirmed: true}}, 922, false, ""},
	{"defect 2: ProviderDropsUnknown", Defects{ProviderDropsUnknown: true}, 0, false, ""},
	{"defect 3: ObeyOlderRecord", Defects{Planner: planner.Faults{ObeyOlderRecord: true}}, 0, false, ""},
	{"defect 4: LearnerSource", Defects{Planner: planner.Faults{LearnerSource: true}}, 0, false, ""},
	{"defect 13: LeaveOnce", Defects{LeaveOnce: true}, 0, false, ""},
	{"SeedRecordBeforeMetadata", Defects{SeedRecordBeforeMetadata: true}, 30200, false, ""},
	// Since a seed's first snapshot follows its confirmation
	// (SnapshotUnconfirmed) seed 40941 shows it no more; 638 is the first
	// from 1.
	{"ResumeBesideQuorum", Defects{Planner: planner.Faults{ResumeBesideQuorum: true}}, 638, false, ""},
	{"SettleOnOwnRecord", Defects{Planner: planner.Faults{SettleOnOwnRecord: true}}, 15693, false,
		"seed 15693 (the first found from seed 1) showed it on a schedule where an empty member restored the newest snapshot at once with no record; such a restore now waits the recovery grace (RestoreWithoutGrace, which brings the catch back on 15693), and no seed shows it since (searched 1..30000 without the collectRunning fault, 1..3000 with it); planner TestSafetyReviewDefects and the checker pin it"},
	{"RecoverBesideSkippedEpoch", Defects{Planner: planner.Faults{RecoverBesideSkippedEpoch: true}}, 49383, false,
		"seed 49383 recovered from a snapshot at revision 102 before delta chains were modeled; its chain now reaches 133 and covers the skipped epoch's writes, so the defect loses none there; no seed found yet (searched 49783.. and 1001..)"},
	{"InstallChainPrefix", Defects{InstallChainPrefix: true}, 0, false, ""},
	{"NewestByCreated", Defects{NewestByCreated: true}, 0, false, ""},
	{"RecoverBesideKnownHealthy", Defects{Planner: planner.Faults{RecoverBesideKnownHealthy: true}}, 240, true, ""},
	{"NoSummaryProbe", Defects{NoSummaryProbe: true}, 5, true, ""},
	// Found with the collectRunning fault (invariant 10).
	// Seed 1051 until the first snapshot followed a seed's confirmation
	// (SnapshotUnconfirmed); 2266 is the first from 1 since.
	{"RecoverBesideUnlistedVoter", Defects{Planner: planner.Faults{RecoverBesideUnlistedVoter: true}}, 2266, true, ""},
	// RestoreWithoutGrace was found on seed 1667; since members share the
	// voters they found (NoFoundVotersShared) a restorer there waits for
	// them anyway, and seed 355 (a restore beside the collected recorder
	// of the newest snapshot's chain) was the first from seed 1; since an
	// unlisted learner is named too (sim seeds 2022, 1000131) the
	// restorer there waits for one, and seed 2345 (a restore with no
	// record beside a serving cluster) is the first from 1955.
	{"RestoreWithoutGrace", Defects{Planner: planner.Faults{RestoreWithoutGrace: true}}, 2345, true, ""},
	// NoWriterProbe was found on seed 172; since the model refuses a
	// newest snapshot outside the record's lineage (AnyLineage), the
	// restores it broke there wait for an operator, and seed 1920 (a
	// restore beside the collected recorder of the newest chain) is the
	// first from 1. Since a seed's or a recovery's first snapshot follows
	// its confirmation, no seed of 1..10000 showed it (searched before the
	// stop's snapshot was modelled): the collected
	// seeder or recoverer's incarnation is in the store at once, and the
	// takeover restores it instead of starting beside it. The store may
	// still fail that first save (the next check is a minute later),
	// which SnapshotUnconfirmed stands for: with it, seed 1920 again.
	// Since members remember a listed peer whose /status named data
	// (ForgetListedHolder reverts it), which names the collected recorder
	// too, only with that memory reverted as well.
	{"NoWriterProbe", Defects{NoWriterProbe: true, ForgetListedHolder: true, Planner: planner.Faults{SnapshotUnconfirmed: true}}, 1920, true, ""},
	{"ForgetKnownHealthy", Defects{ForgetKnownHealthy: true}, 0, true, ""},
	{"NoSummaryBeat", Defects{NoSummaryBeat: true}, 423, true, ""},
	// Seed 466 until the first snapshot followed a seed's confirmation
	// (SnapshotUnconfirmed); 413 since.
	{"NoUnconfirmedSummary", Defects{NoUnconfirmedSummary: true}, 413, true, ""},
	{"NoDamageShared", Defects{NoDamageShared: true}, 1950, true, ""},
	{"RestoreOverLaterSnapshot", Defects{Planner: planner.Faults{RestoreOverLaterSnapshot: true}}, 940, true, ""},
	// Seed 180 seeded a second epoch 1 beside a collected voter; since a
	// seed's first snapshot follows its confirmation, a member with no
	// record restores it there instead; none of 1..3000 shows it, 8920
	// (a second seed at 8 s) the first after
	// (TestTwoSeedsCountATerminalCopyThatIsNamed).
	// Since members share the data holders they remember
	// (NoHoldersShared reverts it), which name the collected voter too,
	// only with that sharing reverted as well, and since the holders a
	// member remembers survive its restart (NoHoldersPersisted reverts
	// it), with that too.
	{"NoFoundVotersShared", Defects{NoFoundVotersShared: true, NoRecordlessSummary: true, NoHoldersShared: true, NoHoldersPersisted: true}, 8920, true, ""},
	{"NoHoldersShared", Defects{NoHoldersShared: true, Planner: planner.Faults{SnapshotUnconfirmed: true}}, 1, true,
		"no plain run found (review rev18f F3 injected a crash): seed 36353 with SnapshotUnconfirmed driven to step 296, the epoch 1 holders behind a partition and m0-1 crashed with its data dir lost; sim TestARestartedMemberTakesItsPeersRememberedHolders and task TestARememberedHolderIsSharedThroughStatus pin it"},
	{"NoHoldersPersisted", Defects{NoHoldersPersisted: true, Planner: planner.Faults{SnapshotUnconfirmed: true}}, 1, true,
		"no plain run found (searched 1..1500 with the collectRunning fault, with and without SnapshotUnconfirmed, alone and with NoHoldersShared; review rev18f F3 injected crashes): seed 36353 with SnapshotUnconfirmed driven to step 296, the epoch 1 holders behind a partition and every member on the other side crashed at once, data kept; sim TestEveryRestartedMemberReadsItsRememberedHolders and task TestRememberedHoldersSurviveARestart pin it"},
	// Found by 100 M steps. Since a leader whose last record read was
	// none beats the summary for its own data's cluster
	// (NoRecordlessSummary reverts it), seeds 8920 and 13315 break only
	// with that reverted too: the beat names the collected seeder; and
	// since members remember a listed data holder (ForgetListedHolder),
	// seed 8920 only with that memory reverted too.
	{"ForgetListedVoter", Defects{ForgetListedVoter: true, NoRecordlessSummary: true, ForgetListedHolder: true}, 8920, true, ""},
	{"SeedForgetsItsRecord", Defects{SeedForgetsItsRecord: true, NoRecordlessSummary: true}, 13315, true, ""},
	// Found by 100 M steps (session 16), either fix enough on its seed;
	// since the first snapshot follows a seed's confirmation, only with
	// that first save failing (SnapshotUnconfirmed), as the store may;
	// since members remember a listed data holder, only with
	// ForgetListedHolder too (the holder's answers are a first-hand find).
	{"ListedVoterBecomesWord and NoRecordlessSummary", Defects{ListedVoterBecomesWord: true, NoRecordlessSummary: true, ForgetListedHolder: true, Planner: planner.Faults{SnapshotUnconfirmed: true}}, 1004733, true, ""},
	// Found by 100 M steps (session 18) with the first save failing.
	{"ForgetListedHolder", Defects{ForgetListedHolder: true, Planner: planner.Faults{SnapshotUnconfirmed: true}}, 36353, true, ""},
	{"RecoverBelowOwnMetaEpoch", Defects{Planner: planner.Faults{RecoverBelowOwnMetaEpoch: true, SnapshotUnconfirmed: true}}, 1009859, true, ""},
	// Found by the operator (operator.go).
	// Seed 2097 until the first snapshot followed a seed's confirmation
	// (SnapshotUnconfirmed); none of 1..3000 since, 4255 the first after,
	// whose schedule the memory of listed data holders changes
	// (ForgetListedHolder keeps it).
	{"OperatorBelowStore", Defects{ForgetListedHolder: true, Planner: planner.Faults{OperatorBelowStore: true}}, 4255, false, ""},
	// Since a seed's or a recovery's first snapshot follows its
	// confirmation no seed of 1..10000 showed it (searched before the
	// stop's snapshot was modelled); the first save failing
	// (SnapshotUnconfirmed) brings seed 2864 back.
	// Since a resumed restore waits below a snapshot of its epoch or a
	// later one (ResumeRestoreBelowLaterEpoch), seed 2864 shows it only
	// with that reverted too.
	{"ResumeRestoreBesideNewer", Defects{Planner: planner.Faults{SnapshotUnconfirmed: true, ResumeRestoreBesideNewer: true, ResumeRestoreBelowLaterEpoch: true}}, 2864, false, ""},
	// Since members remember a listed healthy voter (ForgetListedVoter
	// reverts it), seed 845 recovers from the older epoch's snapshot
	// only with that memory reverted too.
	{"RecoverFromOlderEpochSnapshot", Defects{ForgetListedVoter: true, Planner: planner.Faults{RecoverFromOlderEpochSnapshot: true}}, 845, false,
		"caught on seed 845 until a seed's first snapshot followed its confirmation and a last voter's stop saved one (SnapshotUnconfirmed, task's BeforeStop, session 18); none found since in seeds 1..9000, nor 1..3000 with SnapshotUnconfirmed; planner TestRecoveryPrefersDataOverAnOlderEpochsSnapshot pins it"},
	// RecoverBelowSnapshotEpoch needs the newest snapshot's epoch above
	// the record's; since the model refuses a snapshot outside the
	// record's lineage as the member does (AnyLineage), such a recovery
	// waits beside the refused snapshot instead, and no seed in 1..2400
	// shows the defect: it is caught with the older model (the rule still
	// guards a record whose lineage takes the snapshot: SnapshotEpoch).
	// Since an installed restore never starts below a snapshot of its
	// epoch or a later one (ResumeRestoreBelowLaterEpoch), seed 2749's
	// restore of an epoch the store already holds waits for an operator
	// instead: caught with that reverted too.
	{"RecoverBelowSnapshotEpoch", Defects{AnyLineage: true, Planner: planner.Faults{RecoverBelowSnapshotEpoch: true, ResumeRestoreBelowLaterEpoch: true}}, 2749, false, ""},
	{"SettleOwnRestoreWhileSilent", Defects{Planner: planner.Faults{SettleOwnRestoreWhileSilent: true}}, 2768, false,
		"found on seed 2768 before RecoverBelowSnapshotEpoch's fix changed the epochs its records name; none found since in seeds 1..6000 (planner test TestOwnRestoreRecordSetsNothingAsideWhileInstancesAreSilent)"},
	// Seed 2133 until the first snapshot followed a seed's confirmation
	// (SnapshotUnconfirmed); 2768 the first from 1 since.
	{"RestoreOverLaterWrites", Defects{Planner: planner.Faults{RestoreOverLaterWrites: true}}, 2768, false, ""},
	{"OperatorBelowReplacedRestore", Defects{Planner: planner.Faults{OperatorBelowReplacedRestore: true}}, 121, true,
		"caught on seed 121 until the impatient operator gained recover -keep-running (safety13), which changed every schedule after its first pick; none found in seeds 1..8000 since (collectRunning on); planner TestReplacingAnOperatorsRestoreBelowItsSourceRevisionAsksForAcceptance pins it"},
	// Review of the operator model, session 13.
	{"AcceptAcrossLines", Defects{Planner: planner.Faults{AcceptAcrossLines: true}}, 1, false,
		"no seed found (searched 1..15000 without the collectRunning fault, 1..3000 with it): the model's set-aside data is no member's, so a member of an older line at a higher revision beside an operator's restore record is rare; the planner's checker catches it (broken planner 'accept one revision across lines'), and planner TestOperatorRestoreKeepsLaterWritesOfALineBesideAnOlderLinesHigherRevision pins it"},
	{"KeepWithoutQuorum", Defects{Planner: planner.Faults{KeepWithoutQuorum: true}}, 1, false,
		"no seed found (searched 1..3000 with and without the collectRunning fault): a healthy voter in the model is one of its cluster's quorum side, so the command's fence sees a quorum's worth of them unless the operator cannot reach it; planner TestKeepRunningRecordsTheClusterAQuorumAnswersFor pins it"},
	// Review rev13b.
	{"StartPendingForceNew", Defects{Planner: planner.Faults{StartPendingForceNew: true}}, 1, false,
		"no seed found (searched 1..3000 with and without the collectRunning fault): the seeder must stop between its metadata write and its ForceNewCluster start, and stay down while the old cluster regains a quorum and writes on; the planner's checker catches it (broken planner 'start a pending ForceNew beside one'), and planner TestPendingForceNewStartWaitsBesideAQuorumAndKeepRunningFreesIt pins it"},
	// Review rv14-data. The installed restore's fence stands behind the
	// summary probe: alone it is caught on no seed of 1..600 (with and
	// without collectRunning), with NoSummaryProbe on seed 5
	// (TestCollectedMajorityIsProbed).
	{"StartInstalledRestore", Defects{NoSummaryProbe: true, Planner: planner.Faults{StartInstalledRestore: true}}, 5, true, ""},
	// Found by the 100 M run of session 16 (a liveness failure).
	{"PendingWaitsSilently", Defects{Planner: planner.Faults{PendingWaitsSilently: true}}, 7867, true, ""},
	{"ForceNewDropKeepsEpoch", Defects{ForceNewDropKeepsEpoch: true}, 1, true,
		"no seed found (searched 1..600 with and without the collectRunning fault): Consul must lose the record while the seeder of a recovery from data is stopped between its metadata write and its ForceNewCluster start, and its old cluster must have its quorum back; task TestUnstartedRecoveryWithoutItsRecordStartsAsItsSource pins it"},
	// Seed 16514 of the 100 M run (session 16): Consul restored the
	// record of epoch 1 while epoch 2, a recovery from m0-1's data (same
	// cluster id), ran alone on m0-1, which Nomad had collected, and was
	// snapshotted; two members of epoch 1 rejoined beside it.
	{"RejoinSupersededLine", Defects{Planner: planner.Faults{RejoinSupersededLine: true}}, 16514, true, ""},
	// Seed 1002359 of the 100 M run (session 16): a leaving member of
	// epoch 1 without a quorum looked only under the lock, which the
	// recovery of epoch 2 held; a healed partition gave epoch 1 its
	// quorum back. Either part of the fix reverted breaks it, with the
	// blind member's fence (RunBlindBesideNewerEpoch, seed 41704) reverted
	// too: m0-1, collected, ran blind and stops at step 535 otherwise.
	{"LeaveLooksUnderLockOnly", Defects{LeaveLooksUnderLockOnly: true, Planner: planner.Faults{RunBlindBesideNewerEpoch: true}}, 1002359, true, ""},
	{"LeaveBesideNewerEpoch", Defects{Planner: planner.Faults{LeaveBesideNewerEpoch: true, RunBlindBesideNewerEpoch: true}}, 1002359, true, ""},
	// Seed 41704 of a 100 M run (session 18): two members of epoch 2
	// whose observations failed on Nomad ran on without a quorum beside
	// the recovery of epoch 3; a healed partition gave epoch 2 its quorum
	// back.
	{"RunBlindBesideNewerEpoch", Defects{Planner: planner.Faults{RunBlindBesideNewerEpoch: true}}, 41704, true, ""},
	// Found by e2e TestScaleWithNomadJobRun (session 19): redundancy, not
	// safety; the checker has no invariant it breaks.
	{"LeaveBesideStaleVoter", Defects{Planner: planner.Faults{LeaveBesideStaleVoter: true}}, 1, true,
		"not a safety fault: removing the leaving member instead of a gone voter keeps quorum and loses nothing, it only drops the membership a voter below the desired size and makes the heir join empty; planner TestALeavingMemberWithAnHeirRemovesAStaleVoterFirst and e2e TestScaleWithNomadJobRun pin it"},
	// Review rev18c: seed 16514's shape one epoch later (N1) and with
	// Consul losing its state (N2).
	{"RejoinSupersededAboveRecord", Defects{Planner: planner.Faults{RejoinSupersededAboveRecord: true}}, 1, true,
		"no seed found (searched 7..4650 with collectRunning): two recoveries from one line by ForceNewCluster, a record two epochs older restored, and the middle epoch's members stopped with their data; the planner's checker catches it, and planner TestDataAboveAnOlderRecordOfASupersededLineDoesNotRejoin pins it"},
	{"RejoinSupersededWithoutRecord", Defects{Planner: planner.Faults{RejoinSupersededWithoutRecord: true}}, 4521, true,
		"seed 4521 reaches the shape (Consul lost its state while epoch 4, recovered from epoch 3's line, had lost every copy but its snapshot), but the superseded data's member is a learner alone: it serves nothing, and the operator then restores epoch 4's snapshot; the planner's checker catches it, and planner TestDataWithoutRecordOfASupersededLineDoesNotRejoin pins it"},
	{"NoLineWithoutRecord", Defects{NoLineWithoutRecord: true}, 4521, true,
		"as RejoinSupersededWithoutRecord (seed 4521 reaches it, harmlessly); task TestTheListingNamesTheDatasLineWithoutARecord pins it"},
	// Review rev18f F4 and F5.
	{"RejoinLineUnknown", Defects{Planner: planner.Faults{RejoinLineUnknown: true}}, 1, true,
		"the model's store always answers its listing (ListingUnanswered is never set); the planner's checker catches it, and planner TestDataReRecordingItsEpochWaitsForTheListing, task TestALineEpochOutlivesAListingThatFails pin it"},
	{"RerecordSupersededLine", Defects{Planner: planner.Faults{RerecordSupersededLine: true}}, 1, true,
		"seed 1531 reaches it (with RerecordRemoved too) without a violation: the epoch-1 record m0-2 writes beside epoch 2 is re-recorded by epoch 2's member a loop later, and the model checks no record's epoch; sim TestADroppedLearnerDoesNotReRecordItsEpoch reads it from the trace, the planner's checker catches it, and planner TestARunningMemberDoesNotReRecordASupersededEpoch pins it"},
	{"RerecordRemoved", Defects{Planner: planner.Faults{RerecordRemoved: true}}, 1, true,
		"as RerecordSupersededLine (seed 1531); planner TestADroppedMemberDoesNotReRecordItsEpoch pins it"},
	{"NoLineWhenRerecording", Defects{NoLineWhenRerecording: true}, 1, true,
		"as RerecordSupersededLine (seed 1531); task TestARunningMemberWithoutARecordListsItsLine pins it"},
	{"OperatorForgetsBeyond", Defects{Planner: planner.Faults{OperatorForgetsBeyond: true}}, 1, true,
		"no run changes (searched 7..2999 with collectRunning): the impatient operator's 'recover -from MEMBER -accept-data-loss' must run under a restored older record beside a snapshot of a newer incarnation of the data's line; planner TestOperatorAcceptsTheSnapshotBeyondTheLineageItShowed and cmd TestRecoverFromMemberRecordsTheSnapshotBeyondTheLineageItAccepted pin it"},
	{"OperatorSeesAll", Defects{OperatorSeesAll: true}, 1, true,
		"no run changes (searched 7..2999 with collectRunning), as OperatorForgetsBeyond"},
	{"RecoverAcrossLines", Defects{Planner: planner.Faults{RecoverAcrossLines: true}}, 1, true,
		"no seed found: the model never brings back data of the old line above the fork after the newer line's recovery (a volume reused by a replacement would); the planner's checker catches it, and planner TestDataOfASupersededIncarnationDoesNotRejoin, TestDataAboveAnOlderRecordOfASupersededLineDoesNotRejoin pin it (review rev18f F1)"},
	{"MetaOfAnyCluster", Defects{Planner: planner.Faults{MetaOfAnyCluster: true}}, 1, true,
		"the model writes no metadata of another cluster nor of an epoch near 2^64; planner TestMetadataWithoutDataCountsOnlyForItsClusterAndAsksWhenFull pins it"},
	// Review rev19d W1 and W3b.
	{"PeerMetaOutOfReach", Defects{Planner: planner.Faults{PeerMetaOutOfReach: true}}, 1, true,
		"no seed found: the model forges no /status answer and writes no metadata far above every epoch known; planner TestAPeersMetaEpochOutOfReachDoesNotPushTheRecordToTheTop, TestAPeersMetaEpochOutOfReachDoesNotMakeTheFirstSeedImplausible pin it"},
	{"TakeoverBesideFullMeta", Defects{Planner: planner.Faults{TakeoverBesideFullMeta: true}}, 1, true,
		"no seed found: the model writes no metadata of an epoch near 2^64; planner TestASeedTakeoverBesideOwnFullMetadataAsksAnOperator pins it"},
	// Seed 28743 of the 100 M run (session 18): Consul restored an
	// operator's unconfirmed restore record of epoch 2 after it ran as
	// cluster 295 and epoch 3 recovered from its data and was
	// snapshotted; the resume installed revision 161 below both.
	{"ResumeRestoreBelowLaterEpoch", Defects{Planner: planner.Faults{ResumeRestoreBelowLaterEpoch: true}}, 28743, true, ""},
	{"RerecordUnranEpoch", Defects{ForceNewDropKeepsEpoch: true, Planner: planner.Faults{RerecordUnranEpoch: true}}, 1, true,
		"no seed found (searched 1..600 with ForceNewDropKeepsEpoch and collectRunning), for ForceNewDropKeepsEpoch's reason; the planner's checker catches it (broken planner 're-record an epoch that never ran'), and planner TestAnEpochThatNeverRanIsNeverRerecorded pins it"},
}

// maxSeeds bounds the search for each defect.
const maxSeeds = 400

// findDefect runs seeds until a violation the correct system does not show
// on the same seed: returns the seed, the run and the steps spent.
func findDefect(d Defects, collect bool, from uint64, n int) (uint64, Result, *World, int) {
	spent := 0
	for s := from; s < from+uint64(n); s++ {
		r, w := Run(Config{Seed: s, Defects: d, NoCollectRunning: !collect})
		spent += r.Steps
		if r.Violation == nil {
			continue
		}
		// The same seed with every fix on must run clean up to that step,
		// or the violation is not the defect's.
		c, _ := Run(Config{Seed: s, NoCollectRunning: !collect})
		if c.Violation != nil && c.Violation.Step <= r.Violation.Step {
			continue
		}
		return s, r, w, spent
	}
	return 0, Result{}, nil, spent
}

func TestSimulationCatchesEachDefect(t *testing.T) {
	for _, tc := range defects {
		t.Run(tc.name, func(t *testing.T) {
			if tc.lost != "" {
				t.Skip(tc.lost)
			}
			s, r, w, spent := findDefect(tc.d, tc.collect, max(tc.from, 1), maxSeeds)
			if w == nil {
				t.Fatalf("the simulation missed %s over %d seeds (%d steps)", tc.name, maxSeeds, spent)
			}
			t.Logf("caught on seed %d after %d steps in all: %v", s, spent, r.Violation)
			if testing.Verbose() {
				t.Logf("trace of seed %d:\n%s", s, w.Trace())
			}
		})
	}
}

func TestDefectDetectionStats(t *testing.T) {
	if os.Getenv("SIM_STATS") == "" {
		t.Skip("set SIM_STATS=1 for the median steps to find each defect (SIM_DEFECT=NAME for the ones whose name holds NAME)")
	}
	for _, tc := range defects {
		if !strings.Contains(tc.name, os.Getenv("SIM_DEFECT")) || tc.lost != "" {
			continue
		}
		found, med := medianSteps(max(tc.from, 1), func(from uint64) (uint64, int) {
			s, _, _, spent := findDefect(tc.d, tc.collect, from, maxSeeds)
			return s, spent
		})
		t.Logf("%-34s found %2d times, median %d steps to find", tc.name, found, med)
	}
}

// medianSteps runs find (the seed found from a seed on, 0 if none, and the
// steps spent) up to 15 times, each from the seed after the last found:
// how many times it found one, and the median steps it took (-1: never).
func medianSteps(from uint64, find func(from uint64) (uint64, int)) (int, int) {
	var costs []int
	for i := 0; i < 15; i++ {
		s, spent := find(from)
		if s == 0 {
			break
		}
		costs = append(costs, spent)
		from = s + 1
	}
	sort.Ints(costs)
	if len(costs) == 0 {
		return 0, -1
	}
	return len(costs), costs[len(costs)/2]
}

// TestExplore is `make sim`: SIM_SEED (default: time), SIM_STEPS (total
// steps over consecutive seeds).
func TestExplore(t *testing.T) {
	steps, _ := strconv.Atoi(os.Getenv("SIM_STEPS"))
	if steps == 0 {
		t.Skip("make sim STEPS=... SEED=...")
	}
	seed, err := strconv.ParseUint(os.Getenv("SIM_SEED"), 10, 64)
	if err != nil {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d, %d steps", seed, steps)
	res := explore(t, seed, steps)
	fmt.Println(res)
}

func seedFromEnv() uint64 {
	s, _ := strconv.ParseUint(os.Getenv("SEED"), 10, 64)
	return s
}

// cleanSteps is how many steps the correct system must run without an
// unexplained violation inside `go test`.
const cleanSteps = 2_000_000

func TestCorrectSystemRunsClean(t *testing.T) {
	steps := cleanSteps
	if testing.Short() {
		steps = 100_000
	}
	t.Log(explore(t, 1, steps))
}

// TestCollectedMajorityIsProbed is sim seed 5 (with the collectRunning fault):
// Nomad collects two running voters of three (their hosts cut off from
// its servers, not from their peers), the third leaves gracefully, and
// the three replacements are all empty: before they probed the members of
// the leader's summary (task's observeKnownHealthy needed local data),
// one recovered from the store beside the collected majority that still
// served (two live clusters). NoSummaryProbe reverts the fix; since the
// installed restore's start is fenced too (review rv14-data RV14-1), the
// restorer's start waits beside the majority, and StartInstalledRestore
// reverts that second fence. Members also remember a listed peer that
// answered as a healthy voter (ForgetListedVoter reverts it), or whose
// /status named data (ForgetListedHolder), either of which names the
// majority on seed 5 as well: the defects below revert them too.
func TestCollectedMajorityIsProbed(t *testing.T) {
	r, w := Run(Config{Seed: 5})
	if r.Violation != nil {
		t.Fatalf("seed 5 with CollectRunning: %v\n%s", r.Violation, w.Trace())
	}
	if d, _ := Run(Config{Seed: 5, Defects: Defects{NoSummaryProbe: true, ForgetListedVoter: true, ForgetListedHolder: true}}); d.Violation != nil {
		t.Fatalf("seed 5 with CollectRunning and NoSummaryProbe: %v, want the installed restore's fence to hold", d.Violation)
	}
	d, _ := Run(Config{Seed: 5, Defects: Defects{NoSummaryProbe: true, ForgetListedVoter: true, ForgetListedHolder: true, Planner: planner.Faults{StartInstalledRestore: true}}})
	if d.Violation == nil || d.Violation.Invariant != InvSplitBrain {
		t.Fatalf("seed 5 with CollectRunning and NoSummaryProbe: %v (want %q): the test no longer shows the defect", d.Violation, InvSplitBrain)
	}
}
