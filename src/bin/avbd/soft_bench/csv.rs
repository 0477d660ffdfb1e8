//! soft.csv (every run of every case) and soft_series.csv (per frame).

use std::fmt::Write as _;

use super::run::SoftCaseResult;

/// Every run of every case (`soft.csv`). The static cases fill the reference and error
/// columns, the contact cases the last six (intersections summed over frames, frames with
/// any, least separation within 1 cm, deepest vertex below the ground, lowest vertex at the
/// end, the top's largest horizontal drift).
pub fn csv(cases: &[SoftCaseResult], threads: usize) -> String {
    let mut s = String::from(
        "scene,params,engine,solver,iterations,cg_cap,default_budget,threads,frames,\
         median_ms,p95_ms,tets,vertices,reference_m,value_m,rel_error,threshold,passed,\
         max_attachment_gap_m,settled_attachment_gap_m,finite,intersections,\
         intersecting_frames,min_separation_m,max_depth_below_ground_m,final_lowest_m,\
         top_drift_m\n",
    );
    for c in cases {
        for r in &c.results {
            let (gmax, gset) = match r.gap {
                Some((m, st)) => (format!("{m:e}"), format!("{st:e}")),
                None => (String::new(), String::new()),
            };
            let quality = match &c.reference {
                Some(re) => format!(
                    "{:e},{:e},{:e},{},{}",
                    re.value,
                    r.value,
                    r.error,
                    c.threshold,
                    r.passes(c.threshold)
                ),
                None => ",,,,".into(),
            };
            let contact = match r.contact {
                Some(k) => format!(
                    "{},{},{:e},{:e},{:e},{}",
                    k.intersections,
                    k.intersecting_frames,
                    k.min_separation,
                    k.max_depth,
                    k.final_lowest,
                    k.top_drift.map(|d| format!("{d:e}")).unwrap_or_default()
                ),
                None => ",,,,,".into(),
            };
            let _ = writeln!(
                s,
                "{},{},{},{},{},{},{},{},{},{:.6},{:.6},{},{},{},{},{},{},{}",
                c.case,
                c.params,
                r.engine.engine(),
                r.engine.solver(),
                r.engine.iterations(),
                r.engine.cg_cap().map(|c| c.to_string()).unwrap_or_default(),
                r.engine.is_default(),
                threads,
                r.frames,
                r.median_ms,
                r.p95_ms,
                c.tets,
                c.vertices,
                quality,
                gmax,
                gset,
                r.finite,
                contact
            );
        }
    }
    s
}

/// Every run's probe displacement and gap per frame (`soft_series.csv`, `--soft-series`).
pub fn series_csv(cases: &[SoftCaseResult]) -> String {
    let mut s = String::from("scene,engine,solver,iterations,cg_cap,frame,displacement_m,gap_m\n");
    for c in cases {
        for (r, series) in c.results.iter().zip(&c.series) {
            let cg = r.engine.cg_cap().map(|c| c.to_string()).unwrap_or_default();
            for (f, (x, g)) in series.iter().enumerate() {
                let _ = writeln!(
                    s,
                    "{},{},{},{},{},{},{:e},{}",
                    c.case,
                    r.engine.engine(),
                    r.engine.solver(),
                    r.engine.iterations(),
                    cg,
                    f + 1,
                    x,
                    g.map(|g| format!("{g:e}")).unwrap_or_default()
                );
            }
        }
    }
    s
}
