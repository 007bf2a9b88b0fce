//! What the models share: exploring a model breadth first (a counterexample
//! found is a shortest one), printing the states explored and the time, and
//! requiring a broken variant to be caught with a printed trace.
use stateright::{Checker, HasDiscoveries, Model};
use std::fmt::Debug;
use std::hash::Hash;
use std::time::Instant;

/// Explores `model` exhaustively, or until `property` has a discovery.
pub fn check<M>(name: &str, model: M, property: Option<&'static str>) -> impl Checker<M>
where
    M: Model + Send + Sync + 'static,
    M::State: Hash + Debug + Clone + PartialEq + Send + Sync + 'static,
    M::Action: Debug + Clone + PartialEq + Send + Sync + 'static,
{
    let started = Instant::now();
    let mut builder = model.checker().threads(2);
    if let Some(property) = property {
        builder = builder.finish_when(HasDiscoveries::AnyOf([property].into_iter().collect()));
    }
    let checker = builder.spawn_bfs().join();
    println!(
        "{name}: {} states ({} unique), depth {}, {:.1} s",
        checker.state_count(),
        checker.unique_state_count(),
        checker.max_depth(),
        started.elapsed().as_secs_f64()
    );
    checker
}

/// `model` (a broken variant) must break `property`: its counterexample is
/// printed, each state by `show`, then the step taken; the test fails
/// otherwise.
pub fn must_catch<M>(
    name: &str,
    model: M,
    property: &'static str,
    show: impl Fn(&M::State) -> String,
) where
    M: Model + Clone + Send + Sync + 'static,
    M::State: Hash + Debug + Clone + PartialEq + Send + Sync + 'static,
    M::Action: Debug + Clone + PartialEq + Send + Sync + 'static,
{
    let checker = check(name, model.clone(), Some(property));
    let Some(path) = checker.discovery(property) else {
        panic!("the model did not catch {name}: no counterexample to {property:?}");
    };
    let mut out = String::new();
    for (s, action) in path.into_vec() {
        out += &format!("  {}\n", show(&s));
        if let Some(a) = action {
            out += &format!("    -> {}\n", model.format_action(&a));
        }
    }
    println!("{name} breaks {property:?}:\n{out}");
}
