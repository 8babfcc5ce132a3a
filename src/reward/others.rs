//! The other questions: what an episode's edits did to every question its memory serves besides the
//! target, as the whole-memory formulas count it.
//!
//! The single-question reward judged an edit by one question, so wrecking the rest of the memory was free:
//! deleting every memory outside the question's reading, or writing over memories it does not read, scored
//! exactly 0. Every memory-RL method we know scores an edit against many questions (Mem-α's mean QA
//! accuracy over an instance's questions, Fine-Mem's global QA reward, MemBuilder's per-session QAs,
//! AgeMem's preservation term). Here the episode's environment scores each other question of the
//! conversation (categories 1–4, with a gold answer; the splits are by conversation, so they share the
//! target's split) before and after, and this module turns those p's into the reward's term:
//!
//! - [`OthersWeights::collateral`] (`--reward-formula collateral`): + λ · mean Δp over the others, gains and
//!   losses alike;
//! - [`OthersWeights::damage`] (`damage`): − Σ of every other question's fall in p, gains ignored;
//! - [`OthersWeights::whole_memory`] (the default, `whole-memory`): a fact another question loses from the
//!   memory (deleted or written over) costs as much as the target's own loss; a fact still stated but pushed
//!   out of its reading by what the episode wrote costs half; a rise the episode's writing states for it
//!   pays half. Falls weigh more than rises because an edit that shuffles what other questions read
//!   (copies, guesses, re-rankings) helps some and hurts others at random, and must not break even; a rise
//!   still pays, so an edit that fixes a fact several questions need earns more than one that serves only
//!   the target.
//!
//! The policy never sees which questions count: nothing about them reaches a tool's text. The trainer sees
//! the aggregate in `ScoreEpisodeResponse.others` (count, re-scored, improved, damaged, mean Δp, the term).

/// One other question: p on M₀ and on the final memory, and how much of a rise the episode's own writing
/// states.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OtherDelta {
    /// p on M₀'s reading.
    pub p_old: f64,
    /// p on the final memory's reading (p_old's reading read again when the edits could not change it).
    pub p_new: f64,
    /// What M₀'s own memories state of the answer: the final reading without the memories the episode wrote,
    /// or, where that is less than p_new, any one M₀ memory read alone.
    pub p_m0: f64,
    /// p on the final reading without the written memories that hold none of the question's evidence (the
    /// dialogue turns it is about): what the written memories grounded in its evidence state, with M₀'s.
    pub p_grounded: f64,
    /// Where p fell: what the final memory still states of the answer where the question can read it, in
    /// any one memory of its reach read alone ([`crate::reward::Stater`]; the reach is what ranks among what
    /// it read on M₀); p_new elsewhere.
    pub p_now: f64,
    /// p on the final reading as if the M₀ memories the episode removed without carrying their content were
    /// still there (p_new when it removed none): what its writing alone pushed out.
    pub p_virtual: f64,
}

impl OtherDelta {
    /// A question whose reading the edits could not change.
    pub fn unchanged(p_old: f64, p_new: f64) -> OtherDelta {
        OtherDelta { p_old, p_new, p_m0: p_new, p_grounded: p_new, p_now: p_new, p_virtual: p_new }
    }

    /// p_new − p_old.
    pub fn delta(&self) -> f64 {
        self.p_new - self.p_old
    }

    /// The fall of p (0 when it did not fall).
    pub fn fall(&self) -> f64 {
        (self.p_old - self.p_new).max(0.0)
    }

    /// The part of the fall the memory no longer states where the question can read it: a fact destroyed
    /// (deleted, written over, or moved out of the question's reach).
    pub fn destroyed(&self) -> f64 {
        (self.p_old - self.p_new.max(self.p_now)).max(0.0)
    }

    /// A fact still stated somewhere that the reading no longer reaches, pushed out by what the episode wrote:
    /// measured with the memories it removed without carrying their content still in place
    /// (`p_virtual`), so that removing one memory makes no room for the writing's displacement; what was
    /// destroyed is not counted again. A fact the removals kept in the reading is displaced all the same
    /// (deleting one memory must not make room for writing over another's fact for free).
    pub fn displaced(&self) -> f64 {
        (self.p_old - self.p_virtual - self.destroyed()).max(0.0)
    }

    /// The rise the episode's writing is credited with: what the written memories grounded in the question's
    /// evidence state (with M₀'s), above both p_old and what M₀'s own memories state. Fine-Mem credits a
    /// question's gain to the steps that wrote the memory it used as evidence; here a written memory is
    /// credited for a question only when it keeps one of that question's evidence ids (a rewrite, a merge
    /// or a split of the turns the question is about). Not credited: a rise that only moves an M₀ memory
    /// into the reading (a deletion or a rewrite of what ranked above it), a copy of an M₀ memory, and a
    /// memory written for another question that happens to state this one's answer (a guess, right by
    /// luck): none adds a fact to what this question is about.
    pub fn credited_rise(&self) -> f64 {
        (self.p_new.min(self.p_grounded) - self.p_old.max(self.p_m0)).max(0.0)
    }
}

/// The other questions of an episode, summed up.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Others {
    /// Questions scored besides the target.
    pub count: usize,
    /// Of which the edits could change the reading (re-scored); the rest read exactly what they read on M₀.
    pub rescored: usize,
    /// Questions with a credited rise ([`OtherDelta::credited_rise`]).
    pub improved: usize,
    /// Questions whose p fell.
    pub damaged: usize,
    /// Σ of the credited rises.
    pub gain: f64,
    /// Σ of the falls (positive), of which `destroyed` and `displaced` are charged (a fall that a removed
    /// memory's carried content still explains is neither).
    pub damage: f64,
    /// Σ of the falls the memory no longer states anywhere ([`OtherDelta::destroyed`]).
    pub destroyed: f64,
    /// Σ of the falls still stated somewhere ([`OtherDelta::displaced`]).
    pub displaced: f64,
    /// Mean p_new − p_old over all `count` questions, rises credited or not.
    pub mean_delta: f64,
    /// Of the re-scored, those an LLM evaluator scored (`--others-llm`); the rest were scored offline.
    pub llm_scored: usize,
    /// The offline evaluator that scored the others.
    pub evaluator: &'static str,
}

impl Others {
    /// Sums up `deltas`: `rescored` of them re-scored, `llm_scored` of those by an LLM.
    pub fn of(deltas: &[OtherDelta], rescored: usize, llm_scored: usize, evaluator: &'static str) -> Others {
        let mut o = Others { count: deltas.len(), rescored, llm_scored, evaluator, ..Others::default() };
        for d in deltas {
            let (rise, fall) = (d.credited_rise(), d.fall());
            if rise > 0.0 {
                o.improved += 1;
                o.gain += rise;
            }
            let (destroyed, displaced) = (d.destroyed(), d.displaced());
            if destroyed + displaced > 0.0 {
                o.damaged += 1;
                o.damage += fall;
                o.destroyed += destroyed;
                o.displaced += displaced;
            }
        }
        if !deltas.is_empty() {
            o.mean_delta = deltas.iter().map(OtherDelta::delta).sum::<f64>() / deltas.len() as f64;
        }
        o
    }
}

/// How the other questions' rises and falls enter the reward.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OthersWeights {
    /// Weight of a credited rise (of the mean change, for a mean).
    pub gain: f64,
    /// Weight of a fact destroyed.
    pub destroyed: f64,
    /// Weight of a fact displaced.
    pub displaced: f64,
    /// λ · the mean change of every other question, rises credited or not, instead of the sums.
    pub mean: bool,
}

impl OthersWeights {
    /// λ of the collateral formula.
    pub const COLLATERAL_LAMBDA: f64 = 1.0;
    /// The default's weight of another question's credited rise: what a fact destroyed costs. A credited rise
    /// is a fact the episode wrote, into a memory that keeps the question's evidence, that M₀ stated nowhere:
    /// never a re-ranking or a copy (p_m0), nor a note written for another question (p_grounded), and, as the
    /// reader answers once, never a list of candidates; a wrong guess there costs as much
    /// ([`crate::reward::phrase::MISSTATED`]). It was ½ while guesses could only pay.
    pub const WHOLE_MEMORY_GAIN: f64 = 1.0;
    /// The default's weight of a fact displaced from another question's reading (a fact destroyed weighs 1,
    /// as the target's own loss does).
    pub const WHOLE_MEMORY_DISPLACED: f64 = 0.5;

    /// `collateral`: + λ · mean Δp of the others.
    pub const fn collateral() -> OthersWeights {
        OthersWeights { gain: Self::COLLATERAL_LAMBDA, destroyed: 0.0, displaced: 0.0, mean: true }
    }

    /// `damage`: − Σ of the others' falls.
    pub const fn damage() -> OthersWeights {
        OthersWeights { gain: 0.0, destroyed: 1.0, displaced: 1.0, mean: false }
    }

    /// `whole-memory` (the default): + Σ credited rises − Σ facts destroyed − ½ Σ facts displaced.
    pub const fn whole_memory() -> OthersWeights {
        OthersWeights { gain: Self::WHOLE_MEMORY_GAIN, destroyed: 1.0, displaced: Self::WHOLE_MEMORY_DISPLACED, mean: false }
    }

    /// The others' term of the reward.
    pub fn term(&self, o: &Others) -> f64 {
        if self.mean {
            self.gain * o.mean_delta
        } else {
            self.gain * o.gain - self.destroyed * o.destroyed - self.displaced * o.displaced
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn d(p_old: f64, p_new: f64) -> OtherDelta {
        // Written memories state the rise: M₀'s own say no more than before.
        OtherDelta { p_old, p_new, p_m0: p_old.min(p_new), p_grounded: p_new, p_now: p_new, p_virtual: p_new }
    }

    #[test]
    fn rises_and_falls_are_counted_apart() {
        let o = Others::of(&[d(0.0, 1.0), d(1.0, 0.5), d(0.5, 0.5), d(1.0, 0.0)], 3, 0, "answer-phrase");
        assert_eq!((o.count, o.rescored, o.improved, o.damaged), (4, 3, 1, 2));
        assert_eq!((o.gain, o.damage), (1.0, 1.5));
        assert_eq!(o.mean_delta, -0.125);
        assert_eq!(OthersWeights::collateral().term(&o), -0.125);
        assert_eq!(OthersWeights::damage().term(&o), -1.5);
        assert_eq!((o.destroyed, o.displaced), (1.5, 0.0));
        assert_eq!(OthersWeights::whole_memory().term(&o), -0.5);
        assert_eq!(OthersWeights::collateral().term(&Others::default()), 0.0);
    }

    #[test]
    fn a_rise_is_credited_only_to_what_was_written() {
        // An M₀ memory moved into the reading (a deletion above it): the rise stands in M₀'s own memories.
        let moved = OtherDelta { p_old: 0.0, p_new: 1.0, p_m0: 1.0, p_grounded: 1.0, p_now: 1.0, p_virtual: 1.0 };
        assert_eq!((moved.delta(), moved.credited_rise(), moved.fall()), (1.0, 0.0, 0.0));
        let o = Others::of(&[moved], 1, 0, "x");
        assert_eq!((o.improved, o.gain, o.mean_delta), (0, 0.0, 1.0));
        // A written memory states half of it.
        let half = OtherDelta { p_old: 0.0, p_new: 1.0, p_m0: 0.5, p_grounded: 1.0, p_now: 1.0, p_virtual: 1.0 };
        assert_eq!(half.credited_rise(), 0.5);
        // Stated by a written memory that holds none of the question's evidence: not credited.
        assert_eq!(OtherDelta { p_grounded: 0.0, ..half }.credited_rise(), 0.0);
        assert_eq!(
            OtherDelta::unchanged(0.5, 0.5),
            OtherDelta { p_old: 0.5, p_new: 0.5, p_m0: 0.5, p_grounded: 0.5, p_now: 0.5, p_virtual: 0.5 }
        );
    }

    #[test]
    fn a_fall_is_a_fact_destroyed_or_displaced() {
        // Still stated somewhere: displaced, at half the weight.
        let pushed = OtherDelta { p_old: 1.0, p_new: 0.0, p_m0: 0.0, p_grounded: 0.0, p_now: 1.0, p_virtual: 0.0 };
        assert_eq!((pushed.fall(), pushed.destroyed(), pushed.displaced()), (1.0, 0.0, 1.0));
        // Stated nowhere any more: destroyed.
        let gone = OtherDelta { p_now: 0.0, ..pushed };
        // Removals that made room are measured as if not made: the writing alone pushed it out.
        let room = OtherDelta { p_new: 1.0, p_now: 1.0, p_virtual: 0.0, ..pushed };
        assert_eq!((room.fall(), room.destroyed(), room.displaced()), (0.0, 0.0, 1.0));
        assert_eq!((gone.destroyed(), gone.displaced()), (1.0, 0.0));
        let w = OthersWeights::whole_memory();
        assert_eq!((w.term(&Others::of(&[pushed], 1, 0, "x")), w.term(&Others::of(&[gone], 1, 0, "x"))), (-0.5, -1.0));
    }

    proptest! {
        #[test]
        fn nothing_changed_is_zero_and_a_fall_never_pays(ps in proptest::collection::vec((0.0f64..=1.0, 0.0f64..=1.0), 0..40)) {
            let same: Vec<OtherDelta> = ps.iter().map(|(a, _)| OtherDelta::unchanged(*a, *a)).collect();
            for w in [OthersWeights::collateral(), OthersWeights::damage(), OthersWeights::whole_memory()] {
                prop_assert_eq!(w.term(&Others::of(&same, 0, 0, "x")), 0.0);
                // Lowering any one question's p lowers the term (or leaves it, for a question already at 0).
                let deltas: Vec<OtherDelta> = ps.iter().map(|(a, b)| d(*a, *b)).collect();
                let base = w.term(&Others::of(&deltas, 0, 0, "x"));
                for i in 0..deltas.len() {
                    let mut worse = deltas.clone();
                    worse[i].p_new = 0.0;
                    worse[i].p_m0 = 0.0;
                    worse[i].p_grounded = 0.0;
                    worse[i].p_now = 0.0;
                    worse[i].p_virtual = 0.0;
                    prop_assert!(w.term(&Others::of(&worse, 0, 0, "x")) <= base + 1e-12);
                }
            }
        }
    }
}
