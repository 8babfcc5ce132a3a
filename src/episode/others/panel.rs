//! A conversation's other questions as M₀ answers them (a [`Panel`], built once per conversation and
//! offline evaluator), and the scoring of one episode's memory against them.
//!
//! Scoring is most of the whole-memory reward's cost, so the panel keeps what does not depend on the
//! episode: each question's embedding, M₀'s ranking for it (deep enough to fill its reading after many
//! removals), its reading, budget and p_old, the analysis of every M₀ memory's text (`answer-phrase` reads
//! the same memory for many questions), and, once needed, what each M₀ memory states of each answer. A
//! question's new reading is then M₀'s ranking less what the episode removed, merged with what it wrote;
//! a full search answers only when the removals exhaust the kept ranking, or when M₀ has an HNSW graph (its
//! search is approximate, and the scoring must read what the search reads). Under hybrid search the ranking
//! is M₀'s rank fusion, frozen, with what was written placed in it ([`FrozenFusion`]).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use crate::memory::lexical::{FrozenFusion, Terms};
use crate::memory::{BaseMemory, EpisodeMemory, Filter, MemoryId, MemoryRecord};
use crate::reward::others::OtherDelta;
use crate::reward::phrase::{Analysed, Prepared};
use crate::reward::reading::{cost, Reading, Unit};
use crate::reward::{self, Context, Evaluator, Target};

/// How many M₀ memories beyond the reading depth a question's kept ranking holds: removals up to this many
/// among them are answered from it.
const SPARE: usize = 64;

/// One other question, as M₀ answers it.
#[derive(Debug)]
pub struct Other {
    /// Its question id.
    pub id: String,
    /// Its position in the panel.
    position: usize,
    /// What it is scored against.
    pub target: Target,
    pub(super) query: Vec<f32>,
    /// M₀'s ranking for it, best first: the reading depth and [`SPARE`] more (all of M₀ when smaller).
    ranked: Vec<(f64, MemoryId)>,
    /// The memories M₀'s reading holds, best first.
    read: Vec<MemoryId>,
    /// The score of the last memory read on M₀ (−∞ when it read none): a written memory ranked below it
    /// cannot change the reading.
    floor: f64,
    /// Hybrid search: M₀'s rank fusion for it, frozen ([`FrozenFusion`]); the scores of `ranked` and
    /// `floor` are then fused scores, and what the episode wrote is placed in it.
    fusion: Option<FrozenFusion>,
    budget: usize,
    /// p on M₀'s top-k read whole.
    pub(super) p_old: f64,
    /// p on M₀'s ranking read within the budget: what a reading the edits could not change scores (equal to
    /// `p_old` unless a memory at the end of the top-k holds no content word).
    p_same: f64,
    /// How much of its answer one memory states ([`reward::Stater`]).
    stater: reward::Stater,
    /// What each M₀ memory that states any of its answer states, read alone: computed when first needed
    /// (a rise to credit, or a fall to tell destroyed from displaced).
    statements: OnceLock<Vec<(MemoryId, Vec<f64>)>>,
    /// The M₀ memories it has read so far, prepared for it (`answer-phrase`), by position and the length of
    /// the text read (the budget may cut the last one read).
    prepared: Mutex<HashMap<(u32, usize), Arc<Prepared>>>,
}

impl Other {
    /// The score of the first memory of M₀'s ranking that it did not read (−∞ when it read them all): its
    /// reach is what ranks above it ([`Panel::reaches`]).
    fn reach(&self) -> f64 {
        self.ranked.get(self.read.len()).map_or(f64::NEG_INFINITY, |(s, _)| *s)
    }
}

/// Every other question of one conversation under one offline evaluator.
#[derive(Debug)]
pub struct Panel {
    pub(super) evaluator: Evaluator,
    questions: Vec<Other>,
    /// Each M₀ memory's view analysed, by position (`answer-phrase`).
    analysed: Vec<Analysed>,
    /// Each M₀ memory's view's reading cost, by position.
    costs: Vec<usize>,
    depth: usize,
    /// How many threads one scoring spreads its questions over (at least 1).
    threads: usize,
}

/// What the other questions scored on one episode's memory.
#[derive(Debug, Clone, PartialEq)]
pub struct Scored {
    /// Per question of the panel but the target, in panel order.
    pub deltas: Vec<OtherDelta>,
    /// The re-scored questions: (panel position, position in `deltas`, how many ids its reading gained or
    /// lost).
    pub rescored: Vec<(usize, usize, usize)>,
}

/// What one question reads, and which of the units read are M₀'s own records (live, or a ghost).
struct Seen {
    reading: Reading,
    m0: Vec<bool>,
}

/// How one scoring reads: the settings, and what the episode wrote and removed, analysed once.
struct Pass<'m> {
    memory: &'m EpisodeMemory,
    context: Context,
    /// Read the questions' rankings by full search (an HNSW graph: its search is approximate).
    search: bool,
    /// Score every reading with the evaluator itself, nothing prepared or cached (what the cached scoring
    /// must equal).
    plain: bool,
    /// The records the episode wrote, with their vectors and analyses.
    written: Vec<(&'m MemoryRecord, Vec<f32>)>,
    /// Their lexical terms (hybrid search).
    written_terms: HashMap<MemoryId, Terms>,
    written_analysed: HashMap<MemoryId, Analysed>,
    /// The length of their views (their key in `prepared`, read whole).
    written_lens: HashMap<MemoryId, usize>,
    written_costs: HashMap<MemoryId, usize>,
    /// Units the budget cut, analysed once per pass (by id, length read, and whether it is M₀'s record).
    cut: Mutex<HashMap<(u32, usize, bool), Arc<Analysed>>>,
    /// What is not M₀'s whole memory (written, or cut), prepared for a question once per pass (by the
    /// question's position, the id and the length read): a question's p is taken up to four ways.
    prepared: Mutex<HashMap<(usize, u32, usize), Arc<Prepared>>>,
    /// The M₀ memories the episode removed, each with the records it wrote that carry its content
    /// ([`removed`]): for a question, a removed memory none of whose carriers it can reach is a ghost.
    removed: Vec<(&'m MemoryRecord, Vec<MemoryId>)>,
    /// What each record it wrote carries of the M₀ memories it took the place of ([`carried`]).
    carried: HashMap<MemoryId, Arc<BTreeSet<String>>>,
}

impl Panel {
    /// Builds the panel of `questions` (with their embeddings) on `base`, for readings of depth `depth`,
    /// each scoring spread over `threads` threads.
    pub fn build(
        evaluator: Evaluator,
        base: &Arc<BaseMemory>,
        k: usize,
        depth: usize,
        questions: Vec<(String, Target)>,
        queries: Vec<Vec<f32>>,
        threads: usize,
    ) -> Panel {
        let view = EpisodeMemory::new(base.clone());
        let analysed = base.records().iter().map(|r| Analysed::of(&Reading::whole(&[r]).units[0])).collect();
        let costs = base.records().iter().map(|r| cost(&r.view())).collect();
        let keep = (depth + SPARE).min(base.len());
        let questions = questions
            .into_iter()
            .zip(queries)
            .enumerate()
            .map(|(position, ((id, target), query))| {
                let (hits, _) = view.search_text(&query, &target.question, keep, &Filter::default(), None);
                let recs: Vec<&MemoryRecord> = hits.iter().take(k).map(|h| h.record).collect();
                let whole = Reading::whole(&recs);
                let p_old = reward::evaluate(evaluator, &target, &whole).p;
                let p_same = reward::evaluate(evaluator, &target, &Reading::budgeted(&recs, whole.budget)).p;
                let fusion = frozen_fusion(base, &query, &target.question);
                let score = |h: &crate::memory::Scored<'_>| fusion.as_ref().map_or(f64::from(h.score), |f| f.fused(h.record.id.0 as usize));
                let floor = hits.get(recs.len().saturating_sub(1)).filter(|_| !recs.is_empty()).map_or(f64::NEG_INFINITY, score);
                let stater = reward::Stater::new(evaluator, &target);
                let ranked = hits.iter().map(|h| (score(h), h.record.id)).collect();
                Other {
                    id,
                    position,
                    read: whole.ids(),
                    budget: whole.budget,
                    floor,
                    p_old,
                    p_same,
                    query,
                    target,
                    stater,
                    statements: OnceLock::new(),
                    ranked,
                    fusion,
                    prepared: Mutex::default(),
                }
            })
            .collect();
        Panel { evaluator, questions, analysed, costs, depth, threads: threads.max(1) }
    }

    /// The questions, in dataset order.
    pub fn questions(&self) -> &[Other] {
        &self.questions
    }

    /// Scores every question but `skip` on `memory`: re-scores those whose reading the edits could have
    /// changed (every one when `all`), and gives the rest their unchanged p.
    pub fn score(&self, memory: &EpisodeMemory, skip: &str, context: Context, all: bool) -> Scored {
        self.score_with(memory, skip, context, all, false, false)
    }

    /// [`Self::score`], every ranking from a full search when `search` (what the kept rankings must equal), and
    /// every reading scored by the evaluator itself when `plain` (what the prepared memories must equal). Those
    /// references are scored on one thread, so that they are also what the threaded scoring must equal.
    pub fn score_with(&self, memory: &EpisodeMemory, skip: &str, context: Context, all: bool, search: bool, plain: bool) -> Scored {
        let written: Vec<(&MemoryRecord, Vec<f32>)> = memory.additions().collect();
        let written_terms = written_terms(memory, &written);
        let removed = removed(memory);
        let carried = carried(memory, &written);
        let units: Vec<Unit> = written.iter().flat_map(|(r, _)| Reading::whole(&[*r]).carrying(&carried).units).collect();
        let written_analysed = units.iter().map(|u| (u.id, Analysed::of(u))).collect();
        let written_lens = units.iter().map(|u| (u.id, u.text.len())).collect();
        let written_costs = units.iter().map(|u| (u.id, cost(&u.text))).collect();
        let pass = Pass {
            written_costs,
            written_lens,
            cut: Mutex::default(),
            prepared: Mutex::default(),
            memory,
            context,
            search: search || memory.base().has_graph(),
            plain,
            written_terms,
            removed,
            carried,
            written,
            written_analysed,
        };
        let threads = if search || plain { 1 } else { self.threads };
        let scored = self.each_question(threads, |o| {
            if o.id == skip {
                return None;
            }
            let changed = all
                || o.read.iter().any(|id| !memory.is_original(*id))
                || pass.written.iter().any(|(r, v)| written_score(&pass, o, r, v) >= o.floor);
            if !changed {
                let same = match context {
                    Context::Budget => o.p_same,
                    Context::TopK => o.p_old,
                };
                return Some((OtherDelta::unchanged(o.p_old, same), None));
            }
            let (seen, last) = self.read_scored(&pass, o);
            let now: HashSet<MemoryId> = seen.reading.ids().into_iter().collect();
            let then: HashSet<MemoryId> = o.read.iter().copied().collect();
            Some((self.delta(&pass, o, &seen, last), Some(now.symmetric_difference(&then).count())))
        });
        let mut deltas = Vec::with_capacity(self.questions.len());
        let mut rescored = Vec::new();
        for (i, (delta, moved)) in scored.into_iter().enumerate().filter_map(|(i, d)| Some((i, d?))) {
            if let Some(moved) = moved {
                rescored.push((i, deltas.len(), moved));
            }
            deltas.push(delta);
        }
        Scored { deltas, rescored }
    }

    /// `f` of every question, in panel order, spread over `threads` threads: each takes the next
    /// question not yet taken, so a slow question holds up only its own thread. The questions share the
    /// pass's caches (each behind its lock), and the order of the results is the panel's whatever the threads
    /// did first, so the scoring is the same on any number of threads.
    fn each_question<T: Send>(&self, threads: usize, f: impl Fn(&Other) -> Option<T> + Sync) -> Vec<Option<T>> {
        let n = self.questions.len();
        let threads = threads.clamp(1, n.max(1));
        if threads == 1 {
            return self.questions.iter().map(&f).collect();
        }
        let next = std::sync::atomic::AtomicUsize::new(0);
        let mut out: Vec<Option<T>> = std::iter::repeat_with(|| None).take(n).collect();
        let parts: Vec<Vec<(usize, T)>> = std::thread::scope(|scope| {
            let work = || {
                let mut mine = Vec::new();
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(o) = self.questions.get(i) else { return mine };
                    if let Some(t) = f(o) {
                        mine.push((i, t));
                    }
                }
            };
            let helpers: Vec<_> = (1..threads).map(|_| scope.spawn(work)).collect();
            let mut parts = vec![work()];
            // A helper that panicked (a bug) fails the scoring as it would have on one thread.
            parts.extend(helpers.into_iter().map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))));
            parts
        });
        for (i, t) in parts.into_iter().flatten() {
            out[i] = Some(t);
        }
        out
    }

    /// One re-scored question's p's on its new `reading`, whose last memory read ranked at `last` (`None`:
    /// read by a full search).
    fn delta(&self, pass: &Pass<'_>, o: &Other, reading: &Seen, last: Option<f64>) -> OtherDelta {
        let memory = pass.memory;
        let p_new = self.p(pass, o, reading, |_| true);
        let (mut p_m0, mut p_grounded) = (p_new, p_new);
        if p_new > o.p_old {
            p_m0 = self.p(pass, o, reading, |_| false);
            if p_new > o.p_old.max(p_m0) {
                p_m0 = p_m0.max(self.stated_in_m0(o, memory.base()));
                p_grounded = self.p(pass, o, reading, |u| u.evidence.iter().any(|e| o.target.evidence.contains(e)));
            }
        }
        let p_now = if p_new < o.p_old { self.stated_now(pass, o) } else { p_new };
        let mut d = OtherDelta { p_old: o.p_old, p_new, p_m0, p_grounded, p_now, p_virtual: p_new };
        // Not needed where nothing is left to displace (p_old = 0, or all of it destroyed).
        if o.p_old - d.destroyed() <= 0.0 || pass.removed.is_empty() {
            return d;
        }
        let ghosts = self.ghosts(pass, o);
        let ids: HashSet<MemoryId> = ghosts.iter().map(|g| g.id).collect();
        // A ghost that ranks below the last memory read cannot enter the reading: then p_virtual is p_new.
        let in_reach = match last {
            None => !ghosts.is_empty(),
            Some(floor) => o.ranked.iter().any(|(s, id)| *s >= floor && ids.contains(id)),
        };
        if in_reach {
            d.p_virtual = self.p(pass, o, &self.read_with(pass, o, &ghosts, &ids).0, |_| true);
        }
        d
    }

    /// p of `seen` with M₀'s memories and the written ones `written` keeps.
    fn p(&self, pass: &Pass<'_>, o: &Other, seen: &Seen, written: impl Fn(&Unit) -> bool) -> f64 {
        let kept: Vec<(&Unit, bool)> =
            seen.reading.units.iter().zip(seen.m0.iter().copied()).filter(|(u, _)| pass.memory.is_original(u.id) || written(u)).collect();
        let prepared: Option<Vec<Arc<Prepared>>> =
            if pass.plain { None } else { kept.iter().map(|(u, m0)| self.prepared(pass, o, u, *m0)).collect() };
        match prepared.and_then(|p| o.stater.recall_prepared(p.iter().map(|p| p.as_ref()))) {
            Some(p) => p,
            None => {
                let units = kept.into_iter().map(|(u, _)| u.clone()).collect();
                reward::evaluate(self.evaluator, &o.target, &Reading { units, budget: seen.reading.budget }).p
            }
        }
    }

    /// `unit` prepared for `o` (`answer-phrase`; `None` for the other evaluators): a unit of M₀'s own record
    /// (`m0`: a live one, or a ghost) from `o`'s cache, anything else once per pass. A ghost is read as M₀'s
    /// text even where the episode wrote its id over.
    fn prepared(&self, pass: &Pass<'_>, o: &Other, unit: &Unit, m0: bool) -> Option<Arc<Prepared>> {
        let key = (unit.id.0, unit.text.len());
        if !m0 {
            return match (unit.truncated, pass.written_analysed.get(&unit.id)) {
                (false, Some(a)) => self.prepared_written(pass, o, unit.id, key.1, a),
                _ => self.prepared_in_pass(pass, o, unit.id, key.1, || {
                    pass.cut.lock().entry((key.0, key.1, false)).or_insert_with(|| Arc::new(Analysed::of(unit))).clone()
                }),
            };
        }
        if let Some(p) = o.prepared.lock().get(&key) {
            return Some(p.clone());
        }
        let cut;
        let analysed = if unit.truncated {
            cut = pass.cut.lock().entry((key.0, key.1, true)).or_insert_with(|| Arc::new(Analysed::of(unit))).clone();
            &cut
        } else {
            self.analysed.get(key.0 as usize)?
        };
        let p = Arc::new(o.stater.prepare(analysed)?);
        o.prepared.lock().insert(key, p.clone());
        Some(p)
    }

    /// What the episode wrote as `id` (its view `len` bytes long, `analysed`), prepared for `o` once per pass.
    fn prepared_written(&self, pass: &Pass<'_>, o: &Other, id: MemoryId, len: usize, analysed: &Analysed) -> Option<Arc<Prepared>> {
        self.prepared_in_pass(pass, o, id, len, || analysed)
    }

    /// A unit that is not M₀'s own record (`id`, `len` bytes read), prepared for `o` once per pass from what
    /// `analysed` gives on the first call.
    fn prepared_in_pass<A: std::ops::Deref<Target = Analysed>>(
        &self,
        pass: &Pass<'_>,
        o: &Other,
        id: MemoryId,
        len: usize,
        analysed: impl FnOnce() -> A,
    ) -> Option<Arc<Prepared>> {
        let key = (o.position, id.0, len);
        if let Some(p) = pass.prepared.lock().get(&key) {
            return Some(p.clone());
        }
        let p = Arc::new(o.stater.prepare(&analysed())?);
        pass.prepared.lock().insert(key, p.clone());
        Some(p)
    }

    /// What question `o` reads of the episode's memory:
    /// M₀'s ranking for it less what was removed, merged with what was written (ties by id, as a search
    /// orders them); a full search where that ranking runs out, or where searches are not exact scans.
    fn read(&self, pass: &Pass<'_>, o: &Other) -> Seen {
        self.read_scored(pass, o).0
    }

    /// [`Self::read`], and where the last memory read ranks in `o`'s kept ranking (`None` when a full search
    /// read it).
    fn read_scored(&self, pass: &Pass<'_>, o: &Other) -> (Seen, Option<f64>) {
        self.read_with(pass, o, &[], &HashSet::new())
    }

    /// [`Self::read_scored`] with `ghosts` (removed M₀ memories, their ids `ghost_ids`) kept in place.
    fn read_with(&self, pass: &Pass<'_>, o: &Other, ghosts: &[&MemoryRecord], ghost_ids: &HashSet<MemoryId>) -> (Seen, Option<f64>) {
        let memory = pass.memory;
        let base = memory.base();
        let mut ranked: Vec<(f64, &MemoryRecord)> = Vec::with_capacity(self.depth + ghosts.len());
        let kept_enough = {
            let live: Vec<(f64, &MemoryRecord)> = o
                .ranked
                .iter()
                .filter(|(_, id)| memory.is_original(*id))
                .filter_map(|(s, id)| base.record(id.0 as usize).map(|r| (*s, r)))
                .collect();
            let enough = live.len() >= self.depth || o.ranked.len() == base.len();
            ranked.extend(live);
            enough
        };
        match &o.fusion {
            // The frozen fusion ranks every M₀ memory: the live ones, and what was written placed among them.
            Some(f) => {
                if pass.search || !kept_enough {
                    ranked.clear();
                    let live = (0..base.len()).filter(|i| memory.is_original(MemoryId(*i as u32)));
                    ranked.extend(live.filter_map(|i| base.record(i).map(|r| (f.fused(i), r))));
                }
                ranked.extend(pass.written.iter().map(|(r, v)| (written_score(pass, o, r, v), *r)));
            }
            None if pass.search || !kept_enough => {
                ranked.clear();
                let (hits, _) = memory.search_text(&o.query, &o.target.question, self.depth, &Filter::default(), None);
                ranked.extend(hits.iter().map(|h| (f64::from(h.score), h.record)));
            }
            None => ranked.extend(pass.written.iter().map(|(r, v)| (written_score(pass, o, r, v), *r))),
        }
        let kept_path = kept_enough && !pass.search;
        if !ghosts.is_empty() && kept_path {
            // A ghost below the kept ranking ranks below every memory it keeps: only the kept ones can be read.
            let kept = o.ranked.iter().filter(|(_, id)| ghost_ids.contains(id));
            ranked.extend(kept.filter_map(|(s, id)| base.record(id.0 as usize).map(|r| (*s, r))));
        } else {
            ranked.extend(ghosts.iter().map(|g| {
                let i = g.id.0 as usize;
                (o.fusion.as_ref().map_or_else(|| f64::from(base.dot(&o.query, i)), |f| f.fused(i)), *g)
            }));
        }
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.id.cmp(&b.1.id)));
        ranked.truncate(self.depth);
        let (scores, recs): (Vec<f64>, Vec<&MemoryRecord>) = ranked.into_iter().unzip();
        // M₀'s version of a memory (live, or a ghost) is M₀'s own record; anything else was written.
        let own = |r: &MemoryRecord| base.record(r.id.0 as usize).is_some_and(|m| std::ptr::eq(m, r));
        let reading = match pass.context {
            Context::Budget => Reading::budgeted_by(&recs, o.budget, |r| {
                let known = if own(r) { self.costs.get(r.id.0 as usize).copied() } else { pass.written_costs.get(&r.id).copied() };
                known.unwrap_or_else(|| cost(&r.view()))
            }),
            Context::TopK => Reading::whole(&recs),
        }
        .carrying(&pass.carried);
        let last = reading.units.len().checked_sub(1).map(|i| scores[i]).filter(|_| kept_path);
        // A reading's units are a prefix of the records it ranked, in order.
        let m0 = recs.iter().take(reading.units.len()).map(|r| own(r)).collect();
        (Seen { reading, m0 }, last)
    }

    /// What each M₀ memory states of `o`'s answer (computed once per question).
    fn statements<'a>(&self, o: &'a Other, base: &BaseMemory) -> &'a [(MemoryId, Vec<f64>)] {
        o.statements.get_or_init(|| {
            base.records()
                .iter()
                .zip(&self.analysed)
                .filter(|(_, a)| o.stater.could_state(a))
                .map(|(r, a)| (r.id, o.stater.parts_analysed(r, a)))
                .filter(|(_, parts)| parts.iter().any(|p| *p > 0.0))
                .collect()
        })
    }

    /// What M₀ states of `o`'s answer somewhere.
    fn stated_in_m0(&self, o: &Other, base: &BaseMemory) -> f64 {
        reward::Stater::somewhere(self.statements(o, base).iter().map(|(_, parts)| parts.as_slice()))
    }

    /// What the episode's memory still states of `o`'s answer where `o` can read it: in its M₀ memories
    /// left as they were that `o` read on M₀, and in what it wrote that `o` can reach ([`Self::reaches`]).
    /// A fact moved where the question cannot read it is not kept: deleting the original then destroys it.
    fn stated_now(&self, pass: &Pass<'_>, o: &Other) -> f64 {
        let memory = pass.memory;
        let written: Vec<Vec<f64>> = pass
            .written
            .iter()
            .filter(|(r, v)| self.reaches(pass, o, r, v))
            .filter_map(|(r, _)| {
                let a = pass.written_analysed.get(&r.id)?;
                if !o.stater.could_state(a) {
                    return Some(vec![0.0; o.stater.part_count()]);
                }
                let prepared = pass.written_lens.get(&r.id).and_then(|len| self.prepared_written(pass, o, r.id, *len, a));
                Some(prepared.and_then(|p| o.stater.parts_prepared(&p)).unwrap_or_else(|| o.stater.parts_analysed(r, a)))
            })
            .collect();
        let kept = self
            .statements(o, memory.base())
            .iter()
            .filter(|(id, _)| memory.is_original(*id) && o.read.contains(id))
            .map(|(_, parts)| parts.as_slice());
        reward::Stater::somewhere(kept.chain(written.iter().map(Vec::as_slice)))
    }

    /// Whether `o` can reach what the episode wrote as `r` (its vector `v`): it takes one of the places `o`
    /// read on M₀, ranking above the first M₀ memory `o` did not read there. The reach is M₀'s, not the final
    /// memory's, so it does not depend on what else the episode wrote: padding a copy, or writing above it,
    /// moves no fact into reach. It is the places, not the last score read: the last memory read, rewritten,
    /// keeps its place while it still ranks above the memory that came after it (measured from its own old
    /// score, the slightest move of its vector would take its fact out of reach).
    fn reaches(&self, pass: &Pass<'_>, o: &Other, r: &MemoryRecord, v: &[f32]) -> bool {
        written_score(pass, o, r, v) > o.reach()
    }

    /// The removed M₀ memories that `o` can no longer reach: none of the records that carry their content
    /// ([`removed`]) is in its reach. Measured as if still there, they keep the room they held.
    fn ghosts<'m>(&self, pass: &Pass<'m>, o: &Other) -> Vec<&'m MemoryRecord> {
        let reach = |id: &MemoryId| pass.written.iter().find(|(r, _)| r.id == *id).is_some_and(|(r, v)| self.reaches(pass, o, r, v));
        pass.removed.iter().filter(|(_, carriers)| !carriers.iter().any(reach)).map(|(m, _)| *m).collect()
    }
}

/// The M₀ memories the episode removed (deleted, or written over), each with the records it wrote that
/// carry its content: that hold more than half of its content words, whatever their provenance (its own id
/// rewritten, a merge, a split, or a copy). The displacement of another question's answer is measured as if
/// each removed memory that the question can no longer reach through a carrier ([`Panel::ghosts`]) were
/// still there: removing a memory makes no room that the episode's writing may then fill for free. Whether
/// a record keeps the memory's evidence does not matter here, so that keeping provenance never costs more
/// than copying the text without it.
fn removed(memory: &EpisodeMemory) -> Vec<(&MemoryRecord, Vec<MemoryId>)> {
    if memory.removed_count() == 0 {
        return Vec::new();
    }
    let written: Vec<(&MemoryRecord, std::collections::BTreeSet<String>)> =
        memory.additions().map(|(r, _)| (r, crate::text::content_words(&r.text))).collect();
    memory
        .removed_originals()
        .map(|m| {
            let words = crate::text::content_words(&m.text);
            let carriers = written.iter().filter(|(_, w)| w.intersection(&words).count() * 2 > words.len()).map(|(r, _)| r.id).collect();
            (m, carriers)
        })
        .collect()
}

/// What each record the episode wrote (of `written`) carries of M₀ ([`Unit::carried`]): the content words
/// of the M₀ memories it removed that share the record's id or one of its evidence ids (the memory it
/// rewrote, the ones it merged, the one it split: the provenance the ledger groups words by, which no tool
/// lets the policy choose). A record that took the place of none carries nothing. An answer card the
/// episode wrote states the answer it carries, whatever it added around it ([`crate::reward::phrase`]).
pub(in crate::episode) fn carried(
    memory: &EpisodeMemory,
    written: &[(&MemoryRecord, Vec<f32>)],
) -> HashMap<MemoryId, Arc<BTreeSet<String>>> {
    if memory.removed_count() == 0 {
        return HashMap::new();
    }
    let removed: Vec<(&MemoryRecord, BTreeSet<String>)> =
        memory.removed_originals().map(|m| (m, crate::text::content_words(&m.text))).collect();
    written
        .iter()
        .filter(|(r, _)| r.authored)
        .filter_map(|(r, _)| {
            let sources: Vec<&BTreeSet<String>> =
                removed.iter().filter(|(m, _)| m.id == r.id || m.evidence.iter().any(|e| r.evidence.contains(e))).map(|(_, w)| w).collect();
            (!sources.is_empty()).then(|| (r.id, Arc::new(sources.into_iter().flatten().cloned().collect())))
        })
        .collect()
}

/// One question's reading of an episode's memory, for a caller outside a scoring pass (`--others-llm`).
pub fn reading(panel: &Panel, memory: &EpisodeMemory, o: &Other, context: Context) -> Reading {
    let written: Vec<(&MemoryRecord, Vec<f32>)> = memory.additions().collect();
    let pass = Pass {
        carried: carried(memory, &written),
        memory,
        context,
        search: memory.base().has_graph(),
        plain: false,
        written_terms: written_terms(memory, &written),
        written,
        written_analysed: HashMap::new(),
        written_lens: HashMap::new(),
        written_costs: HashMap::new(),
        cut: Mutex::default(),
        prepared: Mutex::default(),
        removed: Vec::new(),
    };
    panel.read(&pass, o).reading
}

/// M₀'s rank fusion for a question (hybrid search only; `None` for dense search).
fn frozen_fusion(base: &BaseMemory, query: &[f32], question: &str) -> Option<FrozenFusion> {
    if !base.config().hybrid {
        return None;
    }
    let terms: Vec<&Terms> = (0..base.len()).filter_map(|i| base.terms(i)).collect();
    if terms.len() != base.len() {
        return None;
    }
    let dense = (0..base.len()).map(|i| f64::from(base.dot(query, i))).collect();
    Some(FrozenFusion::new(question, dense, &terms))
}

/// The lexical terms of what the episode wrote, when M₀ searches by hybrid fusion.
fn written_terms(memory: &EpisodeMemory, written: &[(&MemoryRecord, Vec<f32>)]) -> HashMap<MemoryId, Terms> {
    if !memory.base().config().hybrid {
        return HashMap::new();
    }
    written.iter().map(|(r, _)| (r.id, Terms::of(&r.text))).collect()
}

/// Where a memory the episode wrote ranks for `o`: its cosine, or, under hybrid search, its place in M₀'s
/// frozen fusion.
fn written_score(pass: &Pass<'_>, o: &Other, r: &MemoryRecord, v: &[f32]) -> f64 {
    let dense = f64::from(crate::util::vector::dot(&o.query, v));
    match (&o.fusion, pass.written_terms.get(&r.id)) {
        (Some(f), Some(t)) => f.place(dense, t),
        _ => dense,
    }
}
