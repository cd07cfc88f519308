{# Sortable tables (click a header); marks <body data-ready="1"> when it ran (tests check the script ran cleanly). #}
(function () {
  function key(cell) {
    var v = cell.getAttribute('data-sort'); if (v === null) v = cell.textContent.trim();
    var n = parseFloat(v); return isNaN(n) ? v.toLowerCase() : n;
  }
  document.querySelectorAll('table.sortable').forEach(function (table) {
    table.querySelectorAll('th').forEach(function (th, col) {
      th.classList.add('sortable'); th.title = document.body.getAttribute('data-sort-title') || 'sort';
      th.addEventListener('click', function () {
        var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
        var dir = th.getAttribute('data-dir') === 'asc' ? -1 : 1;
        th.setAttribute('data-dir', dir === 1 ? 'asc' : 'desc');
        rows.sort(function (a, b) {
          var x = key(a.cells[col]), y = key(b.cells[col]);
          return (x > y ? 1 : x < y ? -1 : 0) * dir;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
  document.body.setAttribute('data-ready', '1');
})();
