/* --html: one self-contained page.  Everything is drawn here as SVG from the
 * downsampled series (decode/series.c); the page's own script (below, ours)
 * only switches between processes and shows the values under the pointer.
 * Nothing is fetched: no external asset, no third-party code. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"

#define NC (DSMT_BK_NCAT - 1) /* allocated categories; cached is not a layer */
/* plot geometry (SVG user units): one unit per column */
#define X0 70
#define PW DSMT_SERIES_COLS
#define Y0 16
#define PH 300
#define SVG_W (X0 + PW + 20)
#define SVG_H (Y0 + PH + 40)
#define BAR_H 160

static const char *const cat_color[DSMT_BK_NCAT] = {
	"#3566a8", /* parameters */
	"#86a9dc", /* gathered_parameters */
	"#1f8a7a", /* master_weights */
	"#e39b2f", /* optimizer_states */
	"#c8423f", /* gradients */
	"#5c9e2e", /* activations */
	"#b7c24a", /* temporaries */
	"#8a5fb0", /* buckets */
	"#d37bb3", /* communication */
	"#7d6a55", /* workspace */
	"#a3a3a3", /* other */
	"#dddddd", /* cached */
};

static void esc(FILE *f, const char *s)
{
	for (; s && *s; s++) {
		switch (*s) {
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '&': fputs("&amp;", f); break;
		case '"': fputs("&quot;", f); break;
		case '\'': fputs("&#39;", f); break;
		default:
			if ((unsigned char)*s < 0x20 && *s != '\n' && *s != '\t')
				fputc('?', f);
			else
				fputc(*s, f);
		}
	}
}

/* "1.23 GiB" */
static void hbytes(FILE *f, uint64_t v)
{
	static const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double x = (double)v;
	int i = 0;
	while (x >= 1024.0 && i < 4) {
		x /= 1024.0;
		i++;
	}
	if (i)
		fprintf(f, "%.2f %s", x, u[i]);
	else
		fprintf(f, "%" PRIu64 " B", v);
}

/* a round step giving about n ticks up to max (1, 2, 5 x 10^k) */
static double nice_step(double max, int n)
{
	if (max <= 0)
		return 1;
	double raw = max / n, p = 1;
	while (p * 10 <= raw)
		p *= 10;
	while (p > raw)
		p /= 10;
	return raw <= p ? p : raw <= 2 * p ? 2 * p : raw <= 5 * p ? 5 * p : 10 * p;
}

struct chart {
	const struct dsmt_process *p;
	const struct dsmt_series *s;
	int idx;
	double ymax; /* bytes at the top of the plot */
};

static double xof(const struct chart *c, uint64_t ns)
{
	const struct dsmt_series *s = c->s;
	if (s->t1_ns <= s->t0_ns)
		return X0;
	if (ns < s->t0_ns)
		ns = s->t0_ns;
	if (ns > s->t1_ns)
		ns = s->t1_ns;
	return X0 + (double)(ns - s->t0_ns) * PW / (double)(s->t1_ns - s->t0_ns);
}

static double yof(const struct chart *c, double bytes) { return Y0 + PH - bytes * PH / c->ymax; }

/* the points of the stacked areas: per column its lowest and highest
 * moments, in time order */
struct pt {
	double x;
	const uint64_t *cat;
};

static size_t points(const struct chart *c, struct pt *o)
{
	size_t n = 0;
	for (size_t k = 0; k < c->s->ncol; k++) {
		const struct dsmt_scol *col = &c->s->col[k];
		int first = col->ts_ns[1] < col->ts_ns[0];
		for (int j = 0; j < 2; j++) {
			int w = j ? !first : first;
			if (j && col->alloc[0] == col->alloc[1] &&
			    !memcmp(col->cat[0], col->cat[1], sizeof(col->cat[0])))
				break; /* one moment is enough */
			o[n].x = xof(c, col->ts_ns[w]);
			o[n].cat = col->cat[w];
			n++;
		}
	}
	return n;
}

/* one layer: its top edge forward, the layer below's top edge back */
static void area(FILE *f, const struct chart *c, const struct pt *pt, size_t n, unsigned cat)
{
	fprintf(f, "<path class=\"area\" data-series=\"%s\" fill=\"%s\" d=\"", dsmt_cat_name(cat), cat_color[cat]);
	double lasty = -1;
	for (size_t i = 0; i < n; i++) {
		double top = 0;
		for (unsigned k = 0; k <= cat; k++)
			top += (double)pt[i].cat[k];
		double y = yof(c, top);
		/* a flat stretch needs only its ends */
		if (i && i + 1 < n && y == lasty) {
			double ny = 0;
			for (unsigned k = 0; k <= cat; k++)
				ny += (double)pt[i + 1].cat[k];
			if (yof(c, ny) == y)
				continue;
		}
		fprintf(f, "%s%.1f,%.1f", i ? "L" : "M", pt[i].x, y);
		lasty = y;
	}
	lasty = -1;
	for (size_t i = n; i-- > 0;) {
		double bot = 0;
		for (unsigned k = 0; k < cat; k++)
			bot += (double)pt[i].cat[k];
		double y = yof(c, bot);
		if (i && i + 1 < n && y == lasty) {
			double ny = 0;
			for (unsigned k = 0; k < cat; k++)
				ny += (double)pt[i - 1].cat[k];
			if (yof(c, ny) == y)
				continue;
		}
		fprintf(f, "L%.1f,%.1f", pt[i].x, y);
		lasty = y;
	}
	fprintf(f, "Z\"><title>%s</title></path>\n", dsmt_cat_name(cat));
}

/* reserved, device, pinned host: the highest level of each column */
static void line(FILE *f, const struct chart *c, const char *name, const char *color, int which)
{
	fprintf(f, "<path class=\"line\" data-series=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\"%s d=\"",
		name, color, which == 2 ? " stroke-dasharray=\"4 3\"" : "");
	double lasty = -1;
	for (size_t k = 0; k < c->s->ncol; k++) {
		const struct dsmt_scol *col = &c->s->col[k];
		uint64_t v = which == 0 ? col->res : which == 1 ? col->dev : col->hp;
		double y = yof(c, (double)v);
		if (k && k + 1 < c->s->ncol && y == lasty) {
			const struct dsmt_scol *nx = &c->s->col[k + 1];
			uint64_t nv = which == 0 ? nx->res : which == 1 ? nx->dev : nx->hp;
			if (yof(c, (double)nv) == y)
				continue;
		}
		fprintf(f, "%s%d,%.1f", k ? "L" : "M", X0 + (int)k, y);
		lasty = y;
	}
	fprintf(f, "\"><title>%s</title></path>\n", name);
}

/* "step 3", "init", "eval1*", ... */
static const char *row_label(const struct dsmt_row *r, char *buf, size_t n)
{
	char b[24];
	snprintf(buf, n, "%s%s", r->kind == DSMT_STEP ? "step " : "", dsmt_row_label(r, b, sizeof(b)));
	return buf;
}

static void axes(FILE *f, const struct chart *c)
{
	static const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double scale = 1;
	int ui = 0;
	while (c->ymax / scale >= 1024 && ui < 4) {
		scale *= 1024;
		ui++;
	}
	double step = nice_step(c->ymax / scale, 5);
	fputs("<g class=\"axes\" font-size=\"11\" fill=\"#333\">\n", f);
	for (double v = 0; v <= c->ymax / scale + 1e-9; v += step) {
		double y = yof(c, v * scale);
		fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>"
			   "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g %s</text>\n",
			X0, X0 + PW, y, y, X0 - 4, y + 4, v, u[ui]);
	}
	double dur = (double)(c->s->t1_ns - c->s->t0_ns) / 1e9;
	double ts = nice_step(dur, 8);
	for (double t = 0; dur > 0 && t <= dur + 1e-9; t += ts) {
		double x = X0 + t * PW / dur;
		fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%gs</text>\n", x, Y0 + PH + 14, t);
	}
	fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#333\"/>\n", X0, X0 + PW, Y0 + PH, Y0 + PH);
	fputs("</g>\n", f);
}

/* dashed lines where steps begin (labels where there is room) */
static void steps(FILE *f, const struct chart *c)
{
	fputs("<g class=\"steps\" font-size=\"10\" fill=\"#555\">\n", f);
	double lastlab = -1e9;
	for (size_t i = 0; i < c->p->nrows; i++) {
		const struct dsmt_row *r = &c->p->rows[i];
		if (r->device != c->s->device || r->kind == DSMT_INIT)
			continue;
		double x = xof(c, r->start_ns);
		char lb[32];
		fprintf(f, "<line class=\"step\" data-step=\"%s\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" "
			   "stroke=\"#999\" stroke-dasharray=\"2 3\"/>",
			row_label(r, lb, sizeof(lb)), x, x, Y0, Y0 + PH);
		if (x - lastlab >= 36) {
			fprintf(f, "<text x=\"%.1f\" y=\"%d\">%s</text>", x + 2, Y0 + 10,
				r->kind == DSMT_STEP ? lb + 5 : lb);
			lastlab = x;
		}
		fputc('\n', f);
	}
	fputs("</g>\n", f);
}

/* the row of this device holding the series' peak (the first with the
 * highest peak) */
static const struct dsmt_row *peak_row(const struct chart *c)
{
	const struct dsmt_row *best = NULL;
	for (size_t i = 0; i < c->p->nrows; i++) {
		const struct dsmt_row *r = &c->p->rows[i];
		if (r->device == c->s->device && (!best || r->peak_alloc > best->peak_alloc))
			best = r;
	}
	return best;
}

static void legend(FILE *f, const struct chart *c, const int *present)
{
	fputs("<div class=\"legend\">", f);
	for (unsigned k = 0; k < NC; k++)
		if (present[k])
			fprintf(f, "<span><i style=\"background:%s\"></i>%s</span>", cat_color[k], dsmt_cat_name(k));
	fputs("<span><i class=\"ln\" style=\"border-color:#222\"></i>reserved</span>", f);
	if (c->p->has_drv)
		fputs("<span><i class=\"ln\" style=\"border-color:#c0392b\"></i>device</span>"
		      "<span><i class=\"ln dash\" style=\"border-color:#16a085\"></i>host pinned</span>",
		      f);
	fputs("<span><i class=\"pk\"></i>peak</span></div>\n", f);
}

/* per step: its peak and its end allocated, side by side */
static void bars(FILE *f, const struct chart *c)
{
	size_t n = 0;
	uint64_t top = 1;
	for (size_t i = 0; i < c->p->nrows; i++) {
		const struct dsmt_row *r = &c->p->rows[i];
		if (r->device != c->s->device)
			continue;
		n++;
		if (r->peak_alloc > top)
			top = r->peak_alloc;
	}
	fprintf(f, "<svg class=\"bars\" id=\"c%d-bars\" viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\">\n",
		c->idx, SVG_W, BAR_H + 30, SVG_W, BAR_H + 30);
	double w = n ? (double)PW / (double)n : PW;
	size_t j = 0;
	double lastlab = -1e9;
	for (size_t i = 0; i < c->p->nrows; i++) {
		const struct dsmt_row *r = &c->p->rows[i];
		if (r->device != c->s->device)
			continue;
		char lb[32];
		double x = X0 + w * (double)j++, hp = (double)r->peak_alloc * BAR_H / (double)top,
		       he = (double)r->end_alloc * BAR_H / (double)top;
		double bw = w > 3 ? w * 0.4 : w / 2;
		fprintf(f, "<g class=\"bar\" data-step=\"%s\" data-peak=\"%" PRIu64 "\" data-end=\"%" PRIu64 "\"><title>%s: peak ",
			row_label(r, lb, sizeof(lb)), r->peak_alloc, r->end_alloc, lb);
		hbytes(f, r->peak_alloc);
		fputs(", end ", f);
		hbytes(f, r->end_alloc);
		fprintf(f, "</title><rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"#3566a8\"/>"
			   "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"#9fbbe0\"/></g>",
			x + w * 0.1, 4 + BAR_H - hp, bw, hp, x + w * 0.1 + bw, 4 + BAR_H - he, bw, he);
		if (x - lastlab >= 36) {
			fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"10\">%s</text>", x + w * 0.1, BAR_H + 18,
				r->kind == DSMT_STEP ? lb + 5 : lb);
			lastlab = x;
		}
		fputc('\n', f);
	}
	fprintf(f, "<text x=\"%d\" y=\"12\" font-size=\"11\" text-anchor=\"end\">", X0 - 4);
	hbytes(f, top);
	fputs("</text></svg>\n", f);
}

static void breakdown(FILE *f, const struct chart *c)
{
	const struct dsmt_row *r = peak_row(c);
	char lb[32];
	fprintf(f, "<h3 id=\"c%d-peak\">Peak: <span class=\"peakval\" data-peak=\"%" PRIu64 "\">%" PRIu64 " bytes</span> (",
		c->idx, c->s->peak, c->s->peak);
	hbytes(f, c->s->peak);
	fputc(')', f);
	if (r) {
		fprintf(f, " in %s", row_label(r, lb, sizeof(lb)));
		const char *ph = dsmt_phase_name(r->peak_phase);
		if (ph)
			fprintf(f, ", phase %s", ph);
	}
	fputs("</h3>\n", f);
	if (!r || !c->p->attrib)
		return;
	if (r->npeak_nvtx) {
		fputs("<p>NVTX ranges open: ", f);
		for (size_t i = 0; i < r->npeak_nvtx; i++) {
			fputs(i ? " &gt; " : "", f);
			esc(f, r->peak_nvtx[i]);
		}
		fputs("</p>\n", f);
	}
	fputs("<table class=\"bk\"><tr><th>category</th><th>bytes</th><th></th><th>share</th></tr>\n", f);
	for (unsigned k = 0; k < DSMT_BK_NCAT; k++) {
		uint64_t v = r->peak_bk.cat[k];
		if (!v)
			continue;
		fprintf(f, "<tr data-category=\"%s\"><td><i style=\"background:%s\"></i>%s</td><td>%" PRIu64 "</td><td>",
			dsmt_cat_name(k), cat_color[k], dsmt_cat_name(k), v);
		hbytes(f, v);
		if (k == DSMT_BK_NCAT - 1) /* cached: beside the peak, not in it */
			fputs("</td><td></td></tr>\n", f);
		else
			fprintf(f, "</td><td>%.1f%%</td></tr>\n",
				r->peak_alloc ? 100.0 * (double)v / (double)r->peak_alloc : 0.0);
	}
	fputs("</table>\n<p class=\"note\">cached = reserved &minus; allocated, not part of the peak.</p>\n", f);
	if (!r->ntop)
		return;
	fputs("<h3>Largest sites live at the peak</h3>\n<ol class=\"top\">\n", f);
	for (size_t t = 0; t < r->ntop; t++) {
		const struct dsmt_top *e = &r->top[t];
		fprintf(f, "<li><b>%" PRIu64 " bytes</b> (", e->bytes);
		hbytes(f, e->bytes);
		fprintf(f, ") in %" PRIu64 " block%s, %s", e->count, e->count == 1 ? "" : "s", dsmt_cat_name(e->cat));
		if (e->site < c->p->nsites) {
			const struct dsmt_site *s = &c->p->sites[e->site];
			fputs("<pre>", f);
			for (size_t k = 0; k < s->nframes; k++) {
				fputs(k < s->npy ? "py  " : "    ", f);
				esc(f, s->frames[k]);
				fputc('\n', f);
			}
			if (!s->nframes)
				fprintf(f, "site 0x%" PRIx64 "\n", s->site);
			fputs("</pre>", f);
		}
		fputs("</li>\n", f);
	}
	fputs("</ol>\n", f);
}

static void chart(FILE *f, struct chart *c)
{
	const struct dsmt_series *s = c->s;
	const char *rank = dsmt_meta_get(c->p, "rank");
	int present[NC] = {0};
	double ymax = 1;
	for (size_t k = 0; k < s->ncol; k++) {
		const struct dsmt_scol *col = &s->col[k];
		for (int j = 0; j < 2; j++)
			for (unsigned q = 0; q < NC; q++)
				present[q] |= col->cat[j][q] != 0;
		double m = (double)col->alloc[1];
		if ((double)col->res > m)
			m = (double)col->res;
		if (c->p->has_drv && (double)col->dev > m)
			m = (double)col->dev;
		if (c->p->has_drv && (double)col->hp > m)
			m = (double)col->hp;
		if (m > ymax)
			ymax = m;
	}
	c->ymax = ymax * 1.05;
	fprintf(f, "<section class=\"chart\" id=\"c%d\" data-file=\"", c->idx);
	esc(f, c->p->file);
	fprintf(f, "\" data-rank=\"%s\" data-device=\"%d\">\n<h2>", rank ? rank : "", s->device);
	if (rank)
		fprintf(f, "rank %s, ", rank);
	fprintf(f, "device %d <small>", s->device);
	esc(f, c->p->file);
	fputs("</small></h2>\n", f);
	legend(f, c, present);
	fprintf(f, "<div class=\"plot\"><svg class=\"mem\" id=\"c%d-mem\" viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" "
		   "data-x0=\"%d\" data-t0=\"%" PRIu64 "\" data-t1=\"%" PRIu64 "\" "
		   "data-a=\"",
		c->idx, SVG_W, SVG_H, SVG_W, SVG_H, X0, s->t0_ns, s->t1_ns);
	for (size_t k = 0; k < s->ncol; k++)
		fprintf(f, "%s%" PRIu64, k ? "," : "", s->col[k].alloc[1]);
	fputs("\" data-r=\"", f);
	for (size_t k = 0; k < s->ncol; k++)
		fprintf(f, "%s%" PRIu64, k ? "," : "", s->col[k].res);
	fputs("\">\n", f);
	axes(f, c);
	struct pt *pt = malloc(2 * (s->ncol ? s->ncol : 1) * sizeof(*pt));
	if (pt) {
		size_t n = points(c, pt);
		for (unsigned k = 0; k < NC; k++)
			if (present[k])
				area(f, c, pt, n, k);
		free(pt);
	}
	steps(f, c);
	line(f, c, "reserved", "#222", 0);
	if (c->p->has_drv) {
		line(f, c, "device", "#c0392b", 1);
		line(f, c, "host_pinned", "#16a085", 2);
	}
	fprintf(f, "<a href=\"#c%d-peak\"><circle class=\"peak\" data-peak=\"%" PRIu64 "\" data-peak-ns=\"%" PRIu64
		   "\" data-bk=\"",
		c->idx, s->peak, s->peak_ns);
	for (size_t k = 0; k < s->ncol; k++) { /* the stack at the peak, as drawn */
		const struct dsmt_scol *col = &s->col[k];
		if (col->alloc[1] != s->peak || col->ts_ns[1] != s->peak_ns)
			continue;
		int first = 1;
		for (unsigned q = 0; q < NC; q++)
			if (col->cat[1][q]) {
				fprintf(f, "%s%s:%" PRIu64, first ? "" : ",", dsmt_cat_name(q), col->cat[1][q]);
				first = 0;
			}
		break;
	}
	fprintf(f, "\" cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"#e01e1e\" stroke=\"#fff\"><title>peak ",
		xof(c, s->peak_ns), yof(c, (double)s->peak));
	hbytes(f, s->peak);
	fputs(": click for its breakdown</title></circle></a>\n", f);
	fprintf(f, "<line class=\"cursor\" x1=\"0\" x2=\"0\" y1=\"%d\" y2=\"%d\" stroke=\"#000\" visibility=\"hidden\"/>\n",
		Y0, Y0 + PH);
	fputs("</svg><div class=\"tip\" hidden></div></div>\n", f);
	fputs("<h3>Per interval: peak and end allocated</h3>\n", f);
	bars(f, c);
	breakdown(f, c);
	fputs("</section>\n", f);
}

static const char page_css[] =
	"body{font:14px system-ui,sans-serif;margin:16px 24px;color:#222}"
	"h1{font-size:20px}h2{font-size:16px;margin:18px 0 4px}h2 small{color:#777;font-weight:normal}"
	"h3{font-size:14px;margin:14px 0 4px}"
	".legend span{margin-right:12px;white-space:nowrap}"
	".legend i,.bk i{display:inline-block;width:12px;height:10px;margin-right:4px;vertical-align:middle}"
	".legend i.ln{height:0;border-top:2px solid;width:14px}.legend i.dash{border-top-style:dashed}"
	".legend i.pk{width:10px;height:10px;border-radius:5px;background:#e01e1e}"
	".plot{position:relative}.tip{position:absolute;background:#fffbe6;border:1px solid #cca;padding:3px 6px;"
	"font-size:12px;pointer-events:none;white-space:pre}"
	"table.bk{border-collapse:collapse}table.bk td,table.bk th{padding:2px 10px;text-align:right}"
	"table.bk td:first-child{text-align:left}ol.top pre{margin:2px 0 8px;font-size:12px;color:#333}"
	".note{color:#777;font-size:12px}";

/* Ours: pick a process, and read the values under the pointer. */
static const char page_js[] =
	"(function(){\n"
	"var pick=document.getElementById('pick');\n"
	"function show(){var v=pick.value,s=document.querySelectorAll('section.chart');"
	"for(var i=0;i<s.length;i++)s[i].hidden=(s[i].id!==v);}\n"
	"if(pick){pick.addEventListener('change',show);show();}\n"
	"function fmt(b){var u=['B','KiB','MiB','GiB','TiB'],i=0;while(b>=1024&&i<4){b/=1024;i++;}"
	"return (i?b.toFixed(2):b)+' '+u[i];}\n"
	"var svgs=document.querySelectorAll('svg.mem');\n"
	"for(var i=0;i<svgs.length;i++)(function(svg){\n"
	"var a=null,r=null,tip=svg.parentNode.querySelector('.tip'),cur=svg.querySelector('.cursor');\n"
	"var x0=+svg.getAttribute('data-x0'),t0=+svg.getAttribute('data-t0'),t1=+svg.getAttribute('data-t1');\n"
	"svg.addEventListener('mousemove',function(ev){\n"
	"if(!a){a=svg.getAttribute('data-a').split(',').map(Number);r=svg.getAttribute('data-r').split(',').map(Number);}\n"
	"var bx=svg.getBoundingClientRect(),vb=svg.viewBox.baseVal,x=(ev.clientX-bx.left)*vb.width/bx.width;\n"
	"var k=Math.floor(x-x0);if(k<0||k>=a.length){tip.hidden=true;cur.setAttribute('visibility','hidden');return;}\n"
	"cur.setAttribute('x1',x0+k+0.5);cur.setAttribute('x2',x0+k+0.5);cur.setAttribute('visibility','visible');\n"
	"var t=(t1-t0)*k/a.length/1e9;\n"
	"tip.textContent='t = '+t.toFixed(3)+' s\\nallocated (max) '+fmt(a[k])+'\\nreserved '+fmt(r[k]);\n"
	"tip.style.left=(ev.clientX-bx.left+14)+'px';tip.style.top=(ev.clientY-bx.top+8)+'px';tip.hidden=false;});\n"
	"svg.addEventListener('mouseleave',function(){tip.hidden=true;cur.setAttribute('visibility','hidden');});\n"
	"})(svgs[i]);\n"
	"})();\n";

void dsmt_write_html(FILE *f, const struct dsmt_process *ps, size_t n)
{
	size_t ncharts = 0;
	for (size_t i = 0; i < n; i++)
		ncharts += ps[i].nseries;
	fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
	      "<link rel=\"icon\" href=\"data:,\">\n<title>dsmemdecode: GPU memory</title>\n<style>",
	      f);
	fputs(page_css, f);
	fputs("</style></head><body>\n<h1>GPU memory over time</h1>\n<p class=\"note\">", f);
	for (size_t i = 0; i < n; i++) {
		fputs(i ? ", " : "", f);
		esc(f, ps[i].file);
	}
	fprintf(f, " &mdash; %d columns, each keeping its lowest and highest allocated moments; "
		   "each block in the category the decoder gives it in each interval (as in --breakdown).</p>\n",
		DSMT_SERIES_COLS);
	if (ncharts > 1) {
		fputs("<p><label>Process and device: <select id=\"pick\">\n", f);
		int idx = 0;
		for (size_t i = 0; i < n; i++)
			for (size_t k = 0; k < ps[i].nseries; k++) {
				const char *rank = dsmt_meta_get(&ps[i], "rank");
				fprintf(f, "<option value=\"c%d\">", idx++);
				if (rank) {
					fputs("rank ", f);
					esc(f, rank);
					fputs(", ", f);
				}
				fprintf(f, "device %d (", ps[i].series[k].device);
				esc(f, ps[i].file);
				fputs(")</option>\n", f);
			}
		fputs("</select></label></p>\n", f);
	}
	if (!ncharts)
		fputs("<p>No device allocations in these traces.</p>\n", f);
	int idx = 0;
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < ps[i].nseries; k++) {
			struct chart c = {&ps[i], &ps[i].series[k], idx++, 1};
			chart(f, &c);
		}
	fputs("<script>\n", f);
	fputs(page_js, f);
	fputs("</script>\n</body></html>\n", f);
}
